/**
 * Issue 32, item 7 ("never truncate"), through the real proxy process on every path it relays: the
 * upstream writes 48 MiB and exits (an exec of `cat` of a 48 MiB file, then `exit 3`; for the
 * port-forward tunnel a TCP server that writes 48 MiB and closes), and the client reads its last
 * 3 MiB slowly — twelve 1 s pauses, more than the old 10 s flush deadline in total — sending a ping
 * at each pause as kubectl does (SPDY PING, WebSocket ping); it also stalls 2 s after 8 MiB, with 40 MiB
 * still to come (more than twice the 16 MiB bound). Every byte arrives (sha256), the exit status too,
 * and the proxy's RSS (and the agent's, through an agent) grows by at most 16 MiB over the stall:
 * backpressure, not buffering. (Over the slow tail's pauses at most its 3 MiB are still to come: a
 * relay that buffered could take in no more than that, so RSS is read over the stall only.)
 *
 * Paths: SPDY passthrough (the project's SPDY client, as kubectl ≤ 1.29), WebSocket v5 translated
 * (`--upstream-streaming spdy`: the dev cluster's SPDY; proven by
 * `apiserver_stream_translator_requests_total`), the port-forward tunnel unwrapped to SPDY, and SPDY
 * passthrough through an agent (`/clusters/one`). The dev cluster, the proxies and the agent each run
 * as their own process (`npm run build` first), all started before the first session.
 *
 * The sessions overlap only in their slow tails, which are idle time: each one's full-speed part and
 * stall begin once the session before it reached its tail ({@link Turns}), so no two stalls, and no
 * stall and another session's full-speed part, overlap — each stall's RSS is one session's, and the
 * upstream runs at full speed for it.
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
const TOTAL = 48 * MiB;
/**
 * A 2 s stall after 8 MiB (40 MiB still to come: a relay that buffered would read them then, at the
 * 20+ MiB/s the slowest path, through the agent, carries), and the slow tail: 3 MiB in 256 KiB steps,
 * a 1 s pause after each (12 s in all).
 */
const SCHEDULE = { total: TOTAL, tail: 3 * MiB, step: 256 * 1024, pauseMs: 1_000, stall: { at: 8 * MiB, ms: 2_000 } };
/** The stall's pause is the one before the slow tail. */
const isStall = (received: number): boolean => received < SCHEDULE.total - SCHEDULE.tail;
const PAUSES = 12;
const TARGET = SLOW_READER_TARGET_MIB * MiB;
/** The exec: the file, then exit status 3 (a NonZeroExitCode Status must follow the last byte). */
const CAT_EXIT_3 = execPath(['sh', '-c', 'cat big.bin; exit 3'], { stdin: false });

/**
 * What processes take in while the reader does not read: RSS read at the start and at the end of the
 * stall (a schedule of bytes, not of time); the growth over it. A relay that buffered instead of
 * applying backpressure would grow by what the upstream sent meanwhile (up to 40 MiB). The pauses of
 * the slow tail are not sampled: at most the tail's 3 MiB are still to come then, and another
 * session's full-speed part may run through the same proxy meanwhile.
 */
class RssWatch {
  readonly #atPause = new Map<number, number>();
  readonly #growth = new Map<number, number>();
  #sampled = false;
  constructor(readonly pids: number[]) {}
  paused(received: number): void {
    if (!isStall(received)) return;
    for (const p of this.pids) this.#atPause.set(p, readRss(p));
  }
  resumed(received: number): void {
    if (!isStall(received)) return;
    for (const p of this.pids) this.#growth.set(p, readRss(p) - this.#atPause.get(p)!);
    this.#sampled = true;
  }
  growth(pid: number): number {
    // No stall sampled is a failure, not a pass.
    return this.#sampled ? this.#growth.get(pid)! : Number.POSITIVE_INFINITY;
  }
  toString(): string {
    return this.pids.map((p) => `pid ${p}: growth over the stall ${(this.growth(p) / MiB).toFixed(1)} MiB`).join('; ');
  }
}

/**
 * Hands out turns in the order they are taken: a turn's session may start once the turn before it was
 * released, which happens when that session reaches its slow tail (or ends, failed or not).
 */
class Turns {
  #last: Promise<void> = Promise.resolve();
  take(): { ready: Promise<void>; release: () => void } {
    const ready = this.#last;
    let release!: () => void;
    this.#last = new Promise<void>((r) => (release = r));
    return { ready, release };
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

describe.concurrent('never truncate: a slow reader gets every byte on every path', () => {
  let work: string;
  let cluster: ClusterChild;
  let file: Buffer;
  let digest: string;
  /** The proxy of the direct paths (`--upstream-streaming spdy`, so that it translates v5 itself). */
  let proxy: ServerProcess;
  /** The proxy the agent's tunnel ends at, and the agent. */
  let agentProxy: ServerProcess;
  let agent: AgentProcess;
  const turns = new Turns();

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-slow-reader-'));
    cluster = await startClusterChild({ dataDir: join(work, 'pods') });
    file = randomBytes(TOTAL);
    digest = createHash('sha256').update(file).digest('hex');
    writeFileSync(join(cluster.dataDir, 'default', 'demo', 'big.bin'), file);
    const token = randomBytes(16).toString('hex');
    writeFileSync(join(work, 'agent-tokens.csv'), `${token},one\n`);
    writeFileSync(join(work, 'agent.token'), `${token}\n`);
    await Promise.all([
      (async () => {
        proxy = await startProxyProcess(cluster.url, ['--upstream-streaming', 'spdy']);
      })(),
      (async () => {
        agentProxy = await startProxyProcess(cluster.url, ['--agent-listen', '127.0.0.1:0', '--agent-token-file', join(work, 'agent-tokens.csv')]);
        const agentUrl = /agents on (\S+)/.exec(agentProxy.readyLine ?? '')![1]!;
        agent = spawnCli(['agent', '--proxy-url', agentUrl, '--cluster-name', 'one', '--token-file', join(work, 'agent.token'), '--upstream', cluster.url]);
        await agent.waitForOutput(/tunnel established/, 20_000);
      })(),
    ]);
  }, 120_000);
  afterAll(async () => {
    await agent?.kill();
    await agentProxy?.close();
    await proxy?.close();
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** Run `session` in its turn; `release` (also called when it ends) lets the next session start. */
  async function inTurn<T>(session: (release: () => void) => Promise<T>): Promise<T> {
    const turn = turns.take();
    await turn.ready;
    try {
      return await session(turn.release);
    } finally {
      turn.release();
    }
  }

  describe('through the proxy', () => {
    it('SPDY passthrough: all 48 MiB and exit status 3, PINGs while paused; RSS bounded', () =>
      inTurn(async (release) => {
        const rss = new RssWatch([proxy.pid]);
        const exec = await spdyExec(proxy.url, CAT_EXIT_3, { stdin: false });
        const r = await readSlowly(exec.stdout, exec.conn, rss, release);
        await exec.closed;
        console.log(String(rss));
        expect(r.received).toBe(TOTAL);
        expect(r.sha256).toBe(digest);
        expect(r.pauses).toBe(PAUSES);
        expect(exitCodeOf(exec.status), exec.status).toBe(3);
        expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
      }), 120_000);

    it('WebSocket v5 translated: all 48 MiB and exit status 3 on channel 3, pings while paused; RSS bounded', () =>
      inTurn(async (release) => {
        // Only this session is translated: the others do not count here.
        const before = await translated(proxy.url);
        const rss = new RssWatch([proxy.pid]);
        const exec = await wsExec(proxy.url, CAT_EXIT_3);
        const got = createHash('sha256');
        const reader = new SlowReader(exec.ws, {
          ...SCHEDULE,
          onPause: (n) => (rss.paused(n), isStall(n) || release(), exec.ws.ping()),
          onResume: (n) => rss.resumed(n),
        });
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
      }), 120_000);

    describe('port-forward tunnel', () => {
      let source: SourceServer;
      afterAll(async () => source?.close());

      it('SPDY/3.1+portforward.k8s.io unwrapped: all 48 MiB the port wrote before closing, PINGs while paused; RSS bounded', () =>
        inTurn(async (release) => {
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
          const r = await readSlowly(f.data, f.conn, rss, release);
          console.log(String(rss));
          expect(r.received).toBe(TOTAL);
          expect(r.sha256).toBe(digest);
          expect(r.pauses).toBe(PAUSES);
          expect(rss.growth(proxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
          f.conn.destroy();
        }), 120_000);
    });
  });

  describe('through an agent', () => {
    it('SPDY passthrough over the tunnel: all 48 MiB and exit status 3, PINGs while paused; proxy and agent RSS bounded', () =>
      inTurn(async (release) => {
        const agentPid = commandPid(agent.child.pid!);
        const rss = new RssWatch([agentProxy.pid, agentPid]);
        const exec = await spdyExec(`${agentProxy.url}/clusters/one/`, CAT_EXIT_3.slice(1), { stdin: false });
        const r = await readSlowly(exec.stdout, exec.conn, rss, release);
        await exec.closed;
        console.log(String(rss));
        expect(r.received).toBe(TOTAL);
        expect(r.sha256).toBe(digest);
        expect(r.pauses).toBe(PAUSES);
        expect(exitCodeOf(exec.status), exec.status).toBe(3);
        expect(rss.growth(agentProxy.pid), String(rss)).toBeLessThanOrEqual(TARGET);
        expect(rss.growth(agentPid), String(rss)).toBeLessThanOrEqual(TARGET);
      }), 120_000);
  });
});

/**
 * Read a SPDY stream (an exec's stdout, a forwarded port's data) on {@link SCHEDULE}, PINGing its
 * connection at each pause and sampling RSS over the stall, until it ends; `onTail` runs at the slow
 * tail's first pause.
 */
async function readSlowly(stream: SpdyStream, conn: SpdyConnection, rss: RssWatch, onTail: () => void): Promise<{ received: number; pauses: number; sha256: string }> {
  const got = createHash('sha256');
  const reader = new SlowReader(stream, {
    ...SCHEDULE,
    onPause: (n) => (rss.paused(n), isStall(n) || onTail(), void conn.ping().catch(() => undefined)),
    onResume: (n) => rss.resumed(n),
  });
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
