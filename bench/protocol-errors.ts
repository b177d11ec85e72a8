/**
 * The protocol-error load benchmark (issue 26 item 2; `npm run bench -- --protocol-errors`,
 * print-only): N translated exec sessions (the dev cluster's `kube-stream-proxy:idle`) are opened
 * and running, then each client sends one frame announcing 2^63 bytes and from then on does
 * nothing: it never answers the close frame and never closes its socket (half-open allowed), as a
 * hostile client would. Measured from /proc/PID/fd of the proxy and of the dev cluster (each its own
 * process): the descriptors before the sessions (baseline), with them open, and over time after the
 * bad frames; the time until the proxy is back to baseline + 20 and the dev cluster (its upstream
 * connections) back to its own baseline + 20; the close codes the clients got. Target (issue 26):
 * 200 sessions, the proxy back to baseline + 20 within 3 s.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { SERVER_START_TIMEOUT_MS, startDevClusterProcess, startNodeScript, startProxyProcess, translateAtProxy, withHeapFloor, type ServerProcess } from './servers.js';

/** Issue 26's target: descriptors back to baseline + this within {@link PROTOCOL_ERROR_TARGET_MS}. */
export const PROTOCOL_ERROR_FD_SLACK = 20;
export const PROTOCOL_ERROR_TARGET_MS = 3_000;

/** Options of {@link runProtocolErrorBenchmark}. */
export interface ProtocolErrorOptions {
  sessions: number;
  /** How long to watch the descriptors after the bad frames, ms. */
  watchMs: number;
  /** Session opens in flight. */
  concurrency: number;
}

export const PROTOCOL_ERRORS_FULL: ProtocolErrorOptions = { sessions: 200, watchMs: 20_000, concurrency: 50 };
export const PROTOCOL_ERRORS_QUICK: ProtocolErrorOptions = { sessions: 20, watchMs: 5_000, concurrency: 20 };

/** One measured proxy. */
export interface ProtocolErrorRow {
  tree: string;
  sessions: number;
  proxyFdsBaseline: number;
  proxyFdsOpen: number;
  clusterFdsBaseline: number;
  clusterFdsOpen: number;
  /** Proxy descriptors 1 s and 3 s after the bad frames were sent. */
  proxyFdsAt1s: number;
  proxyFdsAt3s: number;
  clusterFdsAt3s: number;
  /** ms until the proxy was at baseline + 20 (undefined: not within the watch). */
  proxyBackMs: number | undefined;
  clusterBackMs: number | undefined;
  watchMs: number;
  /** Close codes the clients received, with their counts ("none": no close frame). */
  closeCodes: Record<string, number>;
}

function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A hostile v5 client: half-open allowed, never closes. Resolves once the session's initial frame arrived. */
function openHostile(host: string, port: number): Promise<{ socket: Socket; received: () => Buffer }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, allowHalfOpen: true });
    let buf = Buffer.alloc(0);
    let opened = false;
    socket.on('error', (err) => {
      if (!opened) reject(err);
    });
    socket.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      if (opened) return;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!buf.subarray(0, 12).toString('latin1').includes(' 101')) {
        socket.destroy();
        return reject(new Error(`upgrade answered ${buf.toString('latin1', 0, buf.indexOf('\r\n'))}`));
      }
      // The initial (empty stdout) frame: 0x82 0x01 0x01.
      if (buf.length >= end + 4 + 3) {
        opened = true;
        buf = buf.subarray(end + 4 + 3);
        resolve({ socket, received: () => buf });
      }
    });
    socket.write(
      'GET /api/v1/namespaces/default/pods/demo/exec?command=kube-stream-proxy%3Aidle&stdin=true&stdout=true&stderr=true HTTP/1.1\r\n' +
        `Host: ${host}:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n',
    );
  });
}

/** A masked binary frame head announcing 2^63 bytes (64-bit length with its top bit set), no payload. */
const HUGE_FRAME = Buffer.from([0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);

/** The close code of the first server close frame in `b`, or "none". */
function closeCodeIn(b: Buffer): string {
  let at = 0;
  while (b.length - at >= 2) {
    let len = b[at + 1]! & 0x7f;
    let hl = 2;
    if (len === 126) [len, hl] = [b.length - at >= 4 ? b.readUInt16BE(at + 2) : Infinity, 4];
    else if (len === 127) [len, hl] = [b.length - at >= 10 ? Number(b.readBigUInt64BE(at + 2)) : Infinity, 10];
    if (b.length - at < hl + len) break;
    if ((b[at]! & 0x0f) === 0x8) return len >= 2 ? String(b.readUInt16BE(at + hl)) : '1005';
    at += hl + len;
  }
  return 'none';
}

/** Run the measurement against one proxy (and the dev cluster behind it). */
export async function measureProtocolErrors(proxy: ServerProcess, cluster: ServerProcess, o: ProtocolErrorOptions, tree: string): Promise<ProtocolErrorRow> {
  const { hostname, port } = new URL(proxy.url);
  await sleep(500);
  const proxyFdsBaseline = fdCount(proxy.pid);
  const clusterFdsBaseline = fdCount(cluster.pid);
  const clients: Array<{ socket: Socket; received: () => Buffer }> = [];
  try {
    for (let i = 0; i < o.sessions; i += o.concurrency) {
      const batch = await Promise.all(Array.from({ length: Math.min(o.concurrency, o.sessions - i) }, () => openHostile(hostname, Number(port))));
      clients.push(...batch);
    }
    await sleep(200);
    const proxyFdsOpen = fdCount(proxy.pid);
    const clusterFdsOpen = fdCount(cluster.pid);
    const t0 = performance.now();
    for (const c of clients) c.socket.write(HUGE_FRAME);
    let proxyBackMs: number | undefined;
    let clusterBackMs: number | undefined;
    let proxyFdsAt1s = -1;
    let proxyFdsAt3s = -1;
    let clusterFdsAt3s = -1;
    while (performance.now() - t0 < o.watchMs) {
      const at = performance.now() - t0;
      const p = fdCount(proxy.pid);
      const c = fdCount(cluster.pid);
      if (proxyBackMs === undefined && p <= proxyFdsBaseline + PROTOCOL_ERROR_FD_SLACK) proxyBackMs = at;
      if (clusterBackMs === undefined && c <= clusterFdsBaseline + PROTOCOL_ERROR_FD_SLACK) clusterBackMs = at;
      if (at >= 1_000 && proxyFdsAt1s < 0) proxyFdsAt1s = p;
      if (at >= 3_000 && proxyFdsAt3s < 0) [proxyFdsAt3s, clusterFdsAt3s] = [p, c];
      if (proxyBackMs !== undefined && clusterBackMs !== undefined && at >= 3_000) break;
      await sleep(50);
    }
    const closeCodes: Record<string, number> = {};
    for (const c of clients) {
      const code = closeCodeIn(c.received());
      closeCodes[code] = (closeCodes[code] ?? 0) + 1;
    }
    return {
      tree,
      sessions: o.sessions,
      proxyFdsBaseline,
      proxyFdsOpen,
      clusterFdsBaseline,
      clusterFdsOpen,
      proxyFdsAt1s,
      proxyFdsAt3s,
      clusterFdsAt3s,
      proxyBackMs,
      clusterBackMs,
      watchMs: o.watchMs,
      closeCodes,
    };
  } finally {
    for (const c of clients) c.socket.destroy();
  }
}

/** A dev cluster, then per tree (a base build's proxy first, when given) a fresh proxy and one measurement. */
export async function runProtocolErrorBenchmark(
  options: { quick?: boolean; opts?: Partial<ProtocolErrorOptions>; base?: string; log?: (line: string) => void } = {},
): Promise<ProtocolErrorRow[]> {
  const o = { ...(options.quick ? PROTOCOL_ERRORS_QUICK : PROTOCOL_ERRORS_FULL), ...options.opts };
  const log = options.log ?? (() => undefined);
  const trees: Array<{ label: string; base?: string }> = [...(options.base ? [{ label: `base (${options.base})`, base: options.base }] : []), { label: 'this tree' }];
  const rows: ProtocolErrorRow[] = [];
  for (const tree of trees) {
    // A fresh dev cluster per tree: the base's sessions may still hold upstream connections.
    const cluster = await startDevClusterProcess();
    try {
      // The proxy's translator must meet the bad frames (`--upstream-streaming spdy` where the build
      // has it): the 1.36 dev cluster would take the v5 sessions itself.
      const cli = tree.base === undefined ? undefined : join(tree.base, 'bin', 'kube-stream-proxy.js');
      const args = ['serve', '--listen', '127.0.0.1:0', '--upstream', cluster.url, ...translateAtProxy(cli)];
      const proxy =
        cli === undefined
          ? await startProxyProcess(cluster.url, translateAtProxy())
          : await startNodeScript(cli, args, /^kube-stream-proxy listening on /, SERVER_START_TIMEOUT_MS, withHeapFloor('serve', {}));
      try {
        log(`protocol errors (${tree.label}): ${o.sessions} sessions …`);
        const row = await measureProtocolErrors(proxy, cluster, o, tree.label);
        log(`  proxy fds ${row.proxyFdsBaseline} → ${row.proxyFdsOpen} → ${row.proxyFdsAt3s} at 3 s; back to baseline + ${PROTOCOL_ERROR_FD_SLACK} ${row.proxyBackMs === undefined ? `not within ${o.watchMs / 1000} s` : `after ${row.proxyBackMs.toFixed(0)} ms`}`);
        rows.push(row);
      } finally {
        await proxy.close();
      }
    } finally {
      await cluster.close();
    }
  }
  return rows;
}

const HEAD = ['proxy', 'sessions', 'proxy fds base', 'open', 'at 1 s', 'at 3 s', 'back to base+20', 'dev cluster fds base', 'open', 'at 3 s', 'back to base+20', 'close codes'];

/** Fixed-width text table. */
export function protocolErrorTextTable(rows: ProtocolErrorRow[]): string {
  const back = (ms: number | undefined, watch: number): string => (ms === undefined ? `> ${watch / 1000} s` : `${ms.toFixed(0)} ms`);
  const cells = (r: ProtocolErrorRow): string[] => [
    r.tree,
    String(r.sessions),
    String(r.proxyFdsBaseline),
    String(r.proxyFdsOpen),
    String(r.proxyFdsAt1s),
    String(r.proxyFdsAt3s),
    back(r.proxyBackMs, r.watchMs),
    String(r.clusterFdsBaseline),
    String(r.clusterFdsOpen),
    String(r.clusterFdsAt3s),
    back(r.clusterBackMs, r.watchMs),
    Object.entries(r.closeCodes)
      .map(([k, v]) => `${k} ×${v}`)
      .join(', '),
  ];
  const all = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [
    line(HEAD),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map((r) => line(cells(r))),
    '',
    `target (issue 26): 200 sessions, proxy descriptors back to baseline + ${PROTOCOL_ERROR_FD_SLACK} within ${PROTOCOL_ERROR_TARGET_MS / 1000} s of the bad frames`,
  ].join('\n');
}
