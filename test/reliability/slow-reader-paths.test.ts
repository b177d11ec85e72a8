/**
 * Issue 32, item 7 ("never truncate"), through the real proxy process on every path it relays: the
 * upstream writes 64 MiB and exits (an exec of `cat` of a 64 MiB file, then `exit 3`; for the
 * port-forward tunnel a TCP server that writes 64 MiB and closes), and the client reads its last
 * 3 MiB slowly — twelve 1 s pauses, more than the old 10 s flush deadline in total — sending a ping
 * at each pause as kubectl does (SPDY PING, WebSocket ping); it also stalls 2 s after 8 MiB, with 56 MiB
 * still to come. Every byte arrives (sha256), the exit status too, and the proxy's RSS (and the
 * agent's, through an agent) grows by at most 16 MiB over any pause: backpressure, not buffering.
 *
 * Paths: SPDY passthrough (the project's SPDY client, as kubectl ≤ 1.29), WebSocket v5 translated
 * (`--upstream-streaming spdy`: the dev cluster's SPDY; proven by
 * `apiserver_stream_translator_requests_total`), the port-forward tunnel unwrapped to SPDY, and SPDY
 * passthrough through an agent (`/clusters/one`). The dev cluster, the proxy and the agent each run as
 * their own process (`npm run build` first).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyProcess, type ServerProcess } from '../../bench/servers.js';
import { readRss, SLOW_READER_TARGET_MIB } from '../../bench/slow-reader.js';
import { SlowReader } from '../helpers/slow-reader.js';
import { spawnCli, type AgentProcess } from '../tunnel/tunnel-fixture.js';
import { execPath, spdyExec, startClusterChild, startSourceServer, tunnelForward, wsExec, type ClusterChild, type SourceServer } from './fault-fixture.js';
import type { SpdyConnection, SpdyStream } from '../../src/spdy/index.js';

const MiB = 1024 * 1024;
const TOTAL = 64 * MiB;
/**
 * A 2 s stall after 8 MiB (56 MiB still to come: a relay that buffered would read them then), and the
 * slow tail: 3 MiB in 256 KiB steps, a 1 s pause after each (12 s in all).
 */
const SCHEDULE = { total: TOTAL, tail: 3 * MiB, step: 256 * 1024, pauseMs: 1_000, stall: { at: 8 * MiB, ms: 2_000 } };
const PAUSES = 12;
const TARGET = SLOW_READER_TARGET_MIB * MiB;
/** The exec: the file, then exit status 3 (a NonZeroExitCode Status must follow the last byte). */
const CAT_EXIT_3 = execPath(['sh', '-c', 'cat big.bin; exit 3'], { stdin: false });

/**
 * What processes take in while the reader does not read: RSS read at the start and at the end of
 * each pause (a schedule of bytes, not of time); the largest growth over one pause. A relay that
 * buffered instead of applying backpressure would grow by what the upstream sent meanwhile (up to
 * 56 MiB in the early stall).
 */
class RssWatch {
  readonly #atPause = new Map<number, number>();
  readonly #growth = new Map<number, number>();
  constructor(readonly pids: number[]) {}
  paused(): void {
    for (const p of this.pids) this.#atPause.set(p, readRss(p));
  }
  resumed(): void {
    for (const p of this.pids) this.#growth.set(p, Math.max(this.#growth.get(p) ?? 0, readRss(p) - this.#atPause.get(p)!));
  }
  growth(pid: number): number {
    return this.#growth.get(pid) ?? 0;
  }
  toString(): string {
    return this.pids.map((p) => `pid ${p}: largest growth over a pause ${(this.growth(p) / MiB).toFixed(1)} MiB`).join('; ');
  }
}

/** The process that runs the CLI's command: on Node 20 the CLI starts itself once more for its heap floor (src/heap-floor.ts). */
function commandPid(pid: number): number {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    return children.length === 1 ? Number(children[0]) : pid;
  } catch {
    return pid;
  }
}

function exitCodeOf(status: string): number | undefined {
  if (/"status":"Success"/.test(status)) return 0;
  const m = /"reason":"ExitCode","message":"(\d+)"/.exec(status);
  return m ? Number(m[1]) : undefined;
}

describe('never truncate: a slow reader gets every byte on every path', () => {
  let work: string;
  let cluster: ClusterChild;
  let file: Buffer;
  let digest: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-slow-reader-'));
    cluster = await startClusterChild({ dataDir: join(work, 'pods') });
    file = randomBytes(TOTAL);
    digest = createHash('sha256').update(file).digest('hex');
    writeFileSync(join(cluster.dataDir, 'default', 'demo', 'big.bin'), file);
  });
  afterAll(async () => {
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  describe('through the proxy', () => {
    let proxy: ServerProcess;
    beforeAll(async () => {
      proxy = await startProxyProcess(cluster.url, ['--upstream-streaming', 'spdy']);
    });
    afterAll(async () => proxy?.close());

    it('SPDY passthrough: all 64 MiB and exit status 3, PINGs while paused; RSS bounded', async () => {
      const rss = new RssWatch([proxy.pid]);
      const exec = await spdyExec(proxy.url, CAT_EXIT_3, { stdin: false });
      const r = await readSlowly(exec.stdout, exec.conn, rss);
      await exec.closed;
      console.log(String(rss));
      expect(r.received).toBe(TOTAL);
      expect(r.sha256).toBe(digest);
      expect(r.pauses).toBe(PAUSES);
      expect(exitCodeOf(exec.status), exec.status).toBe(3);
      expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
    }, 90_000);

    it('WebSocket v5 translated: all 64 MiB and exit status 3 on channel 3, pings while paused; RSS bounded', async () => {
      const before = await translated(proxy.url);
      const rss = new RssWatch([proxy.pid]);
      const exec = await wsExec(proxy.url, CAT_EXIT_3);
      const got = createHash('sha256');
      const reader = new SlowReader(exec.ws, { ...SCHEDULE, onPause: () => (rss.paused(), exec.ws.ping()), onResume: () => rss.resumed() });
      exec.ws.on('message', (raw: Buffer) => {
        if (raw.length <= 1 || raw[0] !== 1) return;
        got.update(raw.subarray(1));
        reader.onData(raw.length - 1);
      });
      const { code } = await exec.closed;
      expect(code).toBe(1000);
      console.log(String(rss));
      expect(reader.received).toBe(TOTAL);
      expect(got.digest('hex')).toBe(digest);
      expect(reader.pauses).toBe(PAUSES);
      expect(exitCodeOf(exec.status), exec.status).toBe(3);
      expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
      expect(await translated(proxy.url)).toBe(before + 1);
    }, 90_000);

    describe('port-forward tunnel', () => {
      let source: SourceServer;
      afterAll(async () => source?.close());

      it('SPDY/3.1+portforward.k8s.io unwrapped: all 64 MiB the port wrote before closing, PINGs while paused; RSS bounded', async () => {
        source = await startSourceServer((socket) => {
          let at = 0;
          const pump = (): void => {
            while (at < TOTAL) {
              const n = Math.min(256 * 1024, TOTAL - at);
              at += n;
              if (!socket.write(file.subarray(at - n, at))) return;
            }
            socket.end();
          };
          socket.on('drain', pump);
          pump();
        });
        const rss = new RssWatch([proxy.pid]);
        const f = await tunnelForward(proxy.url, source.port);
        const r = await readSlowly(f.data, f.conn, rss);
        console.log(String(rss));
        expect(r.received).toBe(TOTAL);
        expect(r.sha256).toBe(digest);
        expect(r.pauses).toBe(PAUSES);
        expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
        f.conn.destroy();
      }, 90_000);
    });
  });

  describe('through an agent', () => {
    let proxy: ServerProcess;
    let agent: AgentProcess;
    beforeAll(async () => {
      const token = randomBytes(16).toString('hex');
      writeFileSync(join(work, 'agent-tokens.csv'), `${token},one\n`);
      writeFileSync(join(work, 'agent.token'), `${token}\n`);
      proxy = await startProxyProcess(cluster.url, ['--agent-listen', '127.0.0.1:0', '--agent-token-file', join(work, 'agent-tokens.csv')]);
      const agentUrl = /agents on (\S+)/.exec(proxy.readyLine ?? '')![1]!;
      agent = spawnCli(['agent', '--proxy-url', agentUrl, '--cluster-name', 'one', '--token-file', join(work, 'agent.token'), '--upstream', cluster.url]);
      await agent.waitForOutput(/tunnel established/, 20_000);
    });
    afterAll(async () => {
      await agent?.kill();
      await proxy?.close();
    });

    it('SPDY passthrough over the tunnel: all 64 MiB and exit status 3, PINGs while paused; proxy and agent RSS bounded', async () => {
      const agentPid = commandPid(agent.child.pid!);
      const rss = new RssWatch([proxy.pid, agentPid]);
      const exec = await spdyExec(`${proxy.url}/clusters/one/`, CAT_EXIT_3.slice(1), { stdin: false });
      const r = await readSlowly(exec.stdout, exec.conn, rss);
      await exec.closed;
      console.log(String(rss));
      expect(r.received).toBe(TOTAL);
      expect(r.sha256).toBe(digest);
      expect(r.pauses).toBe(PAUSES);
      expect(exitCodeOf(exec.status), exec.status).toBe(3);
      expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
      expect(rss.growth(agentPid), String(rss)).toBeLessThanOrEqual(TARGET);
    }, 90_000);
  });
});

/** Read a SPDY stream (an exec's stdout, a forwarded port's data) on {@link SCHEDULE}, PINGing its connection and sampling at each pause, until it ends. */
async function readSlowly(stream: SpdyStream, conn: SpdyConnection, rss: RssWatch): Promise<{ received: number; pauses: number; sha256: string }> {
  const got = createHash('sha256');
  const reader = new SlowReader(stream, { ...SCHEDULE, onPause: () => (rss.paused(), void conn.ping().catch(() => undefined)), onResume: () => rss.resumed() });
  stream.on('data', (c: Buffer) => {
    got.update(c);
    reader.onData(c.length);
  });
  await new Promise<void>((resolve, reject) => {
    stream.once('end', () => resolve());
    stream.once('close', () => (stream.readableEnded ? resolve() : reject(new Error(`stream closed after ${reader.received} bytes`))));
  });
  return { received: reader.received, pauses: reader.pauses, sha256: got.digest('hex') };
}

/** `apiserver_stream_translator_requests_total{code="200"}` of the proxy. */
async function translated(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^apiserver_stream_translator_requests_total\{code="200"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : 0;
}
