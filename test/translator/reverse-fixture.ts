/**
 * Test set-up for the reverse translator and tunnel (SPDY clients → WebSocket-only upstreams):
 *
 * - a "gateway": a loopback HTTP server that speaks only WebSockets, as GKE's Connect Gateway and
 *   other gateways do. Any SPDY upgrade gets 403 (a Status); v5 exec/attach is handed to an in-process
 *   forward StreamTranslatorProxy and the `SPDY/3.1+portforward.k8s.io` tunnel to a StreamTunnelProxy,
 *   both pointed at the real dev cluster; plain requests are proxied to the cluster. It records the
 *   head of every upgrade it receives, and can be told to refuse WebSockets as well;
 * - a harness: the server kubectl talks to, which hands every SPDY exec/attach upgrade to a
 *   ReverseStreamTranslatorProxy and every SPDY port-forward to a ReverseStreamTunnelProxy, both
 *   pointed at the gateway (the decision to do so is handlers/stream-path.ts's; here it is direct),
 *   and proxies plain requests to the cluster;
 * - the dev cluster, a kubeconfig for the harness, and the translator counter's codes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { startDevCluster, type DevCluster } from '../../dev/cluster/dev-cluster.js';
import type { Client } from '../e2e/spdy-kubectl-matrix.js';
import { FORCE_SPDY_ENV } from '../helpers/kubectl.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { Upstream } from '../../src/routing/upstream.js';
import { errorStatus } from '../../src/status.js';
import { HEADER_PROTOCOL_VERSION, headerList, PortForwardProtocolV1Name } from '../../src/stream-protocol.js';
import { writeRawStatus } from '../../src/wire/http-response.js';
import type { ClientInfo } from '../../src/wire/forwarded-headers.js';
import { parseRemoteCommandOptions } from '../../src/wire/remote-command-options.js';
import { ReverseStreamTranslatorProxy } from '../../translator/reverse-remote-command.js';
import { ReverseStreamTunnelProxy } from '../../translator/reverse-tunnel.js';
import { isWebSocketRequestWithStreamCloseProtocol } from '../../translator/stream-close-predicate.js';
import { StreamTranslatorProxy, type TranslatorHandle, type TranslatorResult } from '../../translator/stream-translator.js';
import { StreamTunnelProxy, type TunnelOutcome } from '../../translator/stream-tunnel.js';
import { isTunnelingRequest } from '../../translator/stream-tunnel-protocol.js';

/** The SPDY clients of the issue: kubectl 1.27 (SPDY only), 1.29 (SPDY by default), 1.33 with the WebSocket toggles false. */
export const REVERSE_CLIENTS: readonly Client[] = [
  { name: 'kubectl 1.27 (SPDY only)', version: '1.27', env: {} },
  { name: 'kubectl 1.29 (SPDY by default)', version: '1.29', env: {} },
  { name: 'kubectl 1.33 with the WebSocket toggles false', version: '1.33', env: { ...FORCE_SPDY_ENV } },
];

/** A log that keeps every line (the tests read it; nothing may carry a token or content). */
export class TestLog {
  readonly lines: Array<{ level: string; obj: object; msg: string }> = [];
  warn(obj: object, msg: string): void {
    this.lines.push({ level: 'warn', obj, msg });
  }
  info(obj: object, msg: string): void {
    this.lines.push({ level: 'info', obj, msg });
  }
  debug(obj: object, msg: string): void {
    this.lines.push({ level: 'debug', obj, msg });
  }
  /** Every line as one JSON text (error objects by their message). */
  text(): string {
    return this.lines.map((l) => JSON.stringify({ ...l, obj: JSON.parse(JSON.stringify(l.obj, (_k, v: unknown) => (v instanceof Error ? v.message : v))) })).join('\n');
  }
}

/** A counter of `apiserver_stream_translator_requests_total` codes, as the metrics object's method fills it. */
export class CodeCounter {
  readonly codes: number[] = [];
  readonly incStreamTranslatorRequest = (code: number): void => void this.codes.push(code);
}

/** One upgrade request as the gateway received it. */
export interface GatewayUpgrade {
  method: string;
  url: string;
  upgrade: string | undefined;
  webSocketProtocol: string | undefined;
  streamProtocolVersion: string | undefined;
}

/** How the gateway answers a WebSocket upgrade. */
export type GatewayMode = { kind: 'serve' } | { kind: 'refuse'; code: number; message: string };

/** The WebSocket-only upstream. */
export interface Gateway {
  url: string;
  /** Every upgrade request the gateway received, in order: method, url, its `Upgrade`, `Sec-WebSocket-Protocol` and `X-Stream-Protocol-Version` lines. */
  upgrades: GatewayUpgrade[];
  /** Bytes an upgrade request carried past its head (must stay empty: nothing before the 101). */
  earlyBytes: number[];
  mode: GatewayMode;
  /** The end of each exec/attach session the gateway's own translator ran (resolves when its client, the harness, has closed). */
  sessions: Array<Promise<TranslatorResult>>;
  close(): Promise<void>;
}

/** The harness's sessions and tunnels, as they ended. */
export interface HarnessRecord {
  /** Each exec/attach: the upgraded session's result, or the handshake's outcome. */
  translated: Array<Promise<TranslatorResult | Exclude<TranslatorHandle, { kind: 'upgraded' }>>>;
  tunnels: Array<Promise<TunnelOutcome>>;
}

/** Everything a reverse test needs. */
export interface ReverseFixture {
  work: string;
  cluster: DevCluster;
  gateway: Gateway;
  /** The harness kubectl talks to. */
  url: string;
  kubeconfig: string;
  counter: CodeCounter;
  log: TestLog;
  record: HarnessRecord;
  close(): Promise<void>;
}

/** Options of {@link startReverseFixture}. */
export interface ReverseFixtureOptions {
  /** The pods' folder (default: one in the fixture's own temp folder). */
  podsDir?: string;
}

/** Proxy a plain request to `target` (an `http:` base URL), streaming both ways. */
function proxyPlain(req: IncomingMessage, res: ServerResponse, target: URL): void {
  const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
    answer.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
}

function clientOf(req: IncomingMessage): ClientInfo {
  return { remoteAddress: req.socket.remoteAddress, proto: 'http', host: req.headers.host };
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closeServer(server: Server, sockets: Set<Duplex>): Promise<void> {
  for (const s of sockets) s.destroy();
  server.closeAllConnections();
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Start the gateway in front of `clusterUrl`. */
export async function startGateway(clusterUrl: string): Promise<Gateway> {
  const cluster = new Upstream(new URL(clusterUrl), undefined);
  const translator = new StreamTranslatorProxy({ upstream: cluster, metrics: { incStreamTranslatorRequest: () => {} }, maxBytesPerSec: 0, responseTimeoutMs: 10_000 });
  const tunnel = new StreamTunnelProxy({ upstream: cluster, maxBytesPerSec: 0, responseTimeoutMs: 10_000 });
  const sockets = new Set<Duplex>();
  const log = new TestLog();
  const server = createServer((req, res) => proxyPlain(req, res, cluster.url));
  const gateway: Gateway = { url: '', upgrades: [], earlyBytes: [], mode: { kind: 'serve' }, sessions: [], close: () => closeServer(server, sockets) };
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    gateway.upgrades.push({
      method: req.method ?? '',
      url: req.url ?? '',
      upgrade: req.headers.upgrade,
      webSocketProtocol: req.headers['sec-websocket-protocol'],
      streamProtocolVersion: req.headers['x-stream-protocol-version'] as string | undefined,
    });
    gateway.earlyBytes.push(head.length);
    const upgrade = (req.headers.upgrade ?? '').toLowerCase();
    if (upgrade !== 'websocket') {
      writeRawStatus(socket, errorStatus(403, `this gateway does not speak ${req.headers.upgrade ?? 'that protocol'}; use WebSockets`));
      return;
    }
    if (gateway.mode.kind === 'refuse') {
      writeRawStatus(socket, errorStatus(gateway.mode.code, gateway.mode.message));
      return;
    }
    if (isTunnelingRequest(req.rawHeaders)) {
      void tunnel.tryTunnel(req, socket, head, clientOf(req));
      return;
    }
    if (isWebSocketRequestWithStreamCloseProtocol(req.rawHeaders)) {
      const parsed = parseRemoteCommandOptions(new URL(req.url ?? '/', 'http://x').searchParams);
      if (!parsed.ok) return writeRawStatus(socket, parsed.status);
      const handle = translator.translate({ req, socket, head, options: parsed.value, client: clientOf(req), log });
      const done = handle.then((h) => (h.kind === 'upgraded' ? h.done : Promise.reject(new Error(`gateway session not upgraded: ${h.kind}`))));
      done.catch(() => {});
      gateway.sessions.push(done);
      return;
    }
    writeRawStatus(socket, errorStatus(400, 'this gateway speaks v5.channel.k8s.io and the port-forward tunnel only'));
  });
  gateway.url = await listen(server);
  return gateway;
}

/** Start the harness kubectl talks to: SPDY upgrades reverse-translated toward `gatewayUrl`. */
export async function startHarness(
  clusterUrl: string,
  gatewayUrl: string,
  counter: CodeCounter,
  log: TestLog,
): Promise<{ url: string; record: HarnessRecord; close(): Promise<void> }> {
  const gateway = new Upstream(new URL(gatewayUrl), undefined);
  const reverse = new ReverseStreamTranslatorProxy({ upstream: gateway, metrics: counter, maxBytesPerSec: 0, responseTimeoutMs: 10_000 });
  const reverseTunnel = new ReverseStreamTunnelProxy({ upstream: gateway, maxBytesPerSec: 0, responseTimeoutMs: 10_000 });
  const record: HarnessRecord = { translated: [], tunnels: [] };
  const sockets = new Set<Duplex>();
  const server = createServer((req, res) => proxyPlain(req, res, new URL(clusterUrl)));
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://x');
    if (headerList(req.headers, HEADER_PROTOCOL_VERSION).includes(PortForwardProtocolV1Name) || url.pathname.endsWith('/portforward')) {
      record.tunnels.push(reverseTunnel.tryTunnel(req, socket, head, clientOf(req)));
      return;
    }
    const parsed = parseRemoteCommandOptions(url.searchParams);
    if (!parsed.ok) return writeRawStatus(socket, parsed.status);
    const handle = reverse.translate({ req, socket, head, options: parsed.value, client: clientOf(req), log });
    record.translated.push(handle.then(async (h) => (h.kind === 'upgraded' ? await h.done : h)));
  });
  const url = await listen(server);
  return { url, record, close: () => closeServer(server, sockets) };
}

/** Start the dev cluster, the gateway and the harness, with a kubeconfig for the harness. */
export async function startReverseFixture(o: ReverseFixtureOptions = {}): Promise<ReverseFixture> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-reverse-'));
  const cluster = await startDevCluster({ dataDir: o.podsDir ?? join(work, 'pods') });
  const gateway = await startGateway(cluster.url);
  const counter = new CodeCounter();
  const log = new TestLog();
  const harness = await startHarness(cluster.url, gateway.url, counter, log);
  const kubeconfig = join(work, 'kubeconfig');
  writeKubeconfig(kubeconfig, { server: harness.url, name: 'reverse' });
  return {
    work,
    cluster,
    gateway,
    url: harness.url,
    kubeconfig,
    counter,
    log,
    record: harness.record,
    close: async () => {
      await harness.close();
      await gateway.close();
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
