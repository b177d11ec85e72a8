/**
 * The load client shared by the in-test load check (test/reliability/load-*.test.ts) and the full
 * soak (`npm run soak`, bench/soak.ts): translated exec sessions (WebSocket `v5.channel.k8s.io` →
 * proxy → SPDY → dev cluster) running an echo command, each pushing a deterministic pseudo-random
 * byte stream into stdin and reading it back from stdout, both directions SHA-256 hashed on the fly
 * (nothing is held in memory), stdin closed with the v5 CLOSE `[255, 0]`, then the Status on
 * channel 3 and close 1000 are checked.
 *
 * The echo command is `cat` (a real process per session) or the dev cluster's process-free built-in
 * `kube-stream-proxy:idle` (dev/cluster/builtin-commands.ts: stdin → stdout with backpressure,
 * exit 0 on EOF). Everything the proxy does is the same for both: the upgrade, the SPDY streams,
 * the translation of every byte, the Status; only the dev cluster's side is lighter.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import WebSocket from 'ws';

/** The echo commands a load session can run. */
export type EchoCommand = 'cat' | 'kube-stream-proxy:idle';

/** The built-in echo (no process per session). */
export const BUILTIN_ECHO: EchoCommand = 'kube-stream-proxy:idle';

/** The exec request-target of a load session running `command`. */
export function loadExecPath(command: EchoCommand = 'cat'): string {
  return `/api/v1/namespaces/default/pods/demo/exec?command=${encodeURIComponent(command)}&stdin=true&stdout=true&stderr=true`;
}

/** Bytes per stdin message (a kubectl-sized chunk). */
export const LOAD_CHUNK_BYTES = 32 * 1024;
/** Stop sending while more than this waits in the client's WebSocket buffer. */
const SEND_WINDOW_BYTES = 256 * 1024;

/** Source of every session's bytes: 4 MiB of random data, read at per-session offsets. */
let base: Buffer | undefined;
function baseBlock(): Buffer {
  base ??= randomBytes(4 * 1024 * 1024);
  return base;
}

/** Chunk `k` of session `session`'s stream (different sessions get different streams). */
export function sessionChunk(session: number, k: number, size: number): Buffer {
  const b = baseBlock();
  const span = b.length - size;
  const offset = (session * 7919 * 64 + k * 104_729) % span;
  return b.subarray(offset, offset + size);
}

/** How one session ended. */
export interface CatSessionResult {
  session: number;
  /** Bytes sent on stdin. */
  sent: number;
  /** Bytes received on stdout. */
  received: number;
  sentSha256: string;
  receivedSha256: string;
  /** stderr bytes (must be 0). */
  stderr: number;
  /** Raw channel 3 content. */
  status: string;
  closeCode: number | undefined;
  ms: number;
  /** Set when anything went wrong (transport error, bytes or hash mismatch, non-Success status). */
  error?: string;
}

/** Options of {@link runCatSession}. */
export interface CatSessionOptions {
  /** Give up after this long (the session is then an error). Default 10 min. */
  timeoutMs?: number;
  /** The echo command (default `cat`). */
  command?: EchoCommand;
}

/**
 * Run one echo session (`o.command`, default `cat`) moving `bytes` each way through `baseUrl` (the
 * proxy). Never rejects: the result's `error` says what went wrong.
 */
export function runCatSession(baseUrl: string, session: number, bytes: number, o: CatSessionOptions = {}): Promise<CatSessionResult> {
  const url = new URL(loadExecPath(o.command), baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  const started = performance.now();
  const timeoutMs = o.timeoutMs ?? 600_000;
  return new Promise<CatSessionResult>((resolve) => {
    const sentHash = createHash('sha256');
    const receivedHash = createHash('sha256');
    let sent = 0;
    let received = 0;
    let stderr = 0;
    let status = '';
    let transportError: string | undefined;
    let settled = false;
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    const timer = setTimeout(() => {
      transportError ??= `timed out after ${timeoutMs} ms (sent ${sent}, received ${received})`;
      ws.terminate();
    }, timeoutMs);
    ws.on('error', (err) => (transportError ??= err.message));
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary) {
        transportError ??= 'text message from the server';
        return;
      }
      if (data.length <= 1) return; // the initial frame, or an empty one
      const payload = data.subarray(1);
      if (data[0] === 1) {
        received += payload.length;
        receivedHash.update(payload);
      } else if (data[0] === 2) stderr += payload.length;
      else if (data[0] === 3) status += payload.toString('utf8');
    });
    ws.once('close', (code: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const result: CatSessionResult = {
        session,
        sent,
        received,
        sentSha256: sentHash.digest('hex'),
        receivedSha256: receivedHash.digest('hex'),
        stderr,
        status,
        closeCode: code,
        ms: performance.now() - started,
      };
      const error = transportError ?? checkResult(result, bytes);
      if (error !== undefined) {
        result.error = `${error} (sent ${sent}, received ${received}, close ${code}, channel 3 ${JSON.stringify(status.slice(0, 300))})`;
      }
      resolve(result);
    });
    ws.once('open', () => {
      void (async () => {
        for (let k = 0; sent < bytes && ws.readyState === WebSocket.OPEN; k++) {
          const chunk = sessionChunk(session, k, Math.min(LOAD_CHUNK_BYTES, bytes - sent));
          sentHash.update(chunk);
          sent += chunk.length;
          const frame = Buffer.allocUnsafe(chunk.length + 1);
          frame[0] = 0;
          chunk.copy(frame, 1);
          if (ws.bufferedAmount + frame.length > SEND_WINDOW_BYTES) {
            await new Promise<void>((r) => ws.send(frame, { binary: true }, () => r()));
          } else ws.send(frame, { binary: true });
        }
        // v5 CLOSE of stdin: the echo sees EOF, exits 0, the proxy sends Success and closes.
        if (ws.readyState === WebSocket.OPEN) ws.send(Buffer.from([255, 0]), { binary: true });
      })();
    });
  });
}

/** What is wrong with a finished session, if anything. */
function checkResult(r: CatSessionResult, bytes: number): string | undefined {
  if (r.sent !== bytes) return `sent ${r.sent} of ${bytes} bytes`;
  if (r.received !== bytes) return `received ${r.received} of ${bytes} bytes`;
  if (r.receivedSha256 !== r.sentSha256) return 'sha256 of stdout differs from stdin';
  if (r.stderr !== 0) return `${r.stderr} bytes on stderr`;
  let parsed: { status?: string } | undefined;
  try {
    parsed = JSON.parse(r.status) as { status?: string };
  } catch {
    return `channel 3 is not a Status: ${JSON.stringify(r.status)}`;
  }
  if (parsed.status !== 'Success') return `status ${r.status}`;
  if (r.closeCode !== 1000) return `close code ${r.closeCode}`;
  return undefined;
}

/** Summary of a batch of sessions. */
export interface LoadSummary {
  sessions: number;
  /** Bytes per session per direction. */
  bytesPerSession: number;
  wallMs: number;
  /** Sessions whose `error` is set. */
  errors: number;
  /** Bytes sent minus bytes received back, over all sessions (0 when nothing was lost). */
  bytesLost: number;
  hashMismatches: number;
  /** Both directions, MB/s (10^6 bytes per second). */
  mbPerSec: number;
  /** Session durations, ms. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The first few errors, for the report. */
  firstErrors: string[];
}

/** Percentile of sorted numbers. */
function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Summarise `results`. */
export function summarise(results: CatSessionResult[], bytesPerSession: number, wallMs: number): LoadSummary {
  const ms = results.map((r) => r.ms).sort((a, b) => a - b);
  const moved = results.reduce((s, r) => s + r.sent + r.received, 0);
  return {
    sessions: results.length,
    bytesPerSession,
    wallMs,
    errors: results.filter((r) => r.error !== undefined).length,
    bytesLost: results.reduce((s, r) => s + (r.sent - r.received), 0),
    hashMismatches: results.filter((r) => r.sentSha256 !== r.receivedSha256).length,
    mbPerSec: moved / 1e6 / (wallMs / 1000),
    p50Ms: pct(ms, 50),
    p99Ms: pct(ms, 99),
    maxMs: ms[ms.length - 1] ?? 0,
    firstErrors: results.filter((r) => r.error !== undefined).slice(0, 5).map((r) => `session ${r.session}: ${r.error}`),
  };
}

/** `concurrency` sessions at once, each moving `bytes` each way. */
export async function runConcurrent(
  baseUrl: string,
  concurrency: number,
  bytes: number,
  o: CatSessionOptions & { rampMs?: number } = {},
): Promise<LoadSummary> {
  const started = performance.now();
  // Session i starts at i/concurrency of the ramp: every session still overlaps all the others, but
  // the dev cluster does not have to fork 1,000 `cat`s in one burst.
  const ramp = o.rampMs ?? 0;
  const start = (i: number): Promise<CatSessionResult> =>
    ramp > 0 && i > 0
      ? new Promise((r) => setTimeout(r, (i * ramp) / concurrency)).then(() => runCatSession(baseUrl, i, bytes, o))
      : runCatSession(baseUrl, i, bytes, o);
  const results = await Promise.all(Array.from({ length: concurrency }, (_, i) => start(i)));
  return summarise(results, bytes, performance.now() - started);
}

/**
 * `count` sessions one after another, each moving `bytes` each way; `onProgress` every `every`
 * sessions (e.g. to sample file descriptors and heap).
 */
export async function runSequential(
  baseUrl: string,
  count: number,
  bytes: number,
  o: CatSessionOptions & { firstSession?: number; every?: number; onProgress?: (done: number) => void | Promise<void> } = {},
): Promise<LoadSummary> {
  const started = performance.now();
  const results: CatSessionResult[] = [];
  for (let i = 0; i < count; i++) {
    results.push(await runCatSession(baseUrl, (o.firstSession ?? 0) + i, bytes, o));
    if (o.onProgress && o.every && (i + 1) % o.every === 0) await o.onProgress(i + 1);
  }
  return summarise(results, bytes, performance.now() - started);
}

/** Open file descriptors of `pid` (Linux /proc). */
export function openFds(pid: number | 'self' = 'self'): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** One line for a summary. */
export function summaryLine(name: string, s: LoadSummary): string {
  const mb = (s.bytesPerSession / 1e6).toFixed(s.bytesPerSession >= 1e6 ? 0 : 3);
  return (
    `${name}: ${s.sessions} sessions × ${mb} MB each way in ${(s.wallMs / 1000).toFixed(1)} s ` +
    `(${s.mbPerSec.toFixed(1)} MB/s both ways), errors ${s.errors}, bytes lost ${s.bytesLost}, ` +
    `sha256 mismatches ${s.hashMismatches}, session p50 ${s.p50Ms.toFixed(0)} ms, p99 ${s.p99Ms.toFixed(0)} ms, max ${s.maxMs.toFixed(0)} ms` +
    (s.firstErrors.length > 0 ? `\n  ${s.firstErrors.join('\n  ')}` : '')
  );
}
