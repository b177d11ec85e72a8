/**
 * Test helpers for recording: an in-memory sink (uploads whose storage can be slowed or failed at
 * will), and a recording relay — a tiny TCP relay in front of a server that tees every byte it
 * forwards and, after the HTTP heads of an upgrade, feeds both directions to a RelayObserver, as the
 * proxy's splice relay will.
 */
import { createHash } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { RelayObserver, TerminationPlan } from '../../../src/recording/observer.js';
import type { V1Status } from '../../../src/status.js';
import type { RecordingSink, RecordingSummary, RecordingUpload } from '../../../src/recording/sink.js';

/** An upload kept in memory. `hold` stops accepting bytes (a slow sink); `fail` makes it fail. */
export class MemoryUpload implements RecordingUpload {
  text = '';
  summary: RecordingSummary | undefined;
  aborted = false;
  #held: string[] = [];
  #holding = false;
  #errors: Array<(e: Error) => void> = [];
  #drains: Array<() => void> = [];
  #failed: Error | undefined;
  write(chunk: string | Buffer): void {
    const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (this.#failed) return;
    if (this.#holding) this.#held.push(text);
    else this.text += text;
  }
  get pendingBytes(): number {
    return this.#held.reduce((n, t) => n + Buffer.byteLength(t), 0);
  }
  hold(): void {
    this.#holding = true;
  }
  release(): void {
    this.#holding = false;
    this.text += this.#held.join('');
    this.#held = [];
    for (const d of this.#drains) d();
  }
  fail(e: Error): void {
    this.#failed = e;
    for (const l of this.#errors.splice(0)) l(e);
  }
  onError(l: (e: Error) => void): void {
    this.#errors.push(l);
  }
  onDrain(l: () => void): void {
    this.#drains.push(l);
  }
  async finish(summary: RecordingSummary): Promise<void> {
    this.release();
    this.summary = summary;
  }
  async abort(summary: RecordingSummary): Promise<void> {
    this.aborted = true;
    this.summary = summary;
  }
  /** The cast as parsed lines: header and events. */
  parsed(): { header: Record<string, any>; events: Array<[number, string, string]> } {
    const lines = this.text.split('\n').filter((l) => l !== '');
    return { header: JSON.parse(lines[0]!), events: lines.slice(1).map((l) => JSON.parse(l)) };
  }
}

/** A sink of MemoryUploads. */
export class MemorySink implements RecordingSink {
  readonly kind = 'directory' as const;
  readonly uploads = new Map<string, MemoryUpload>();
  readonly records: RecordingSummary[] = [];
  openError: Error | undefined;
  /** Set: the health check before an upgrade fails with it. */
  checkError: Error | undefined;
  async check(): Promise<void> {
    if (this.checkError) throw this.checkError;
  }
  async open(id: string): Promise<RecordingUpload> {
    if (this.openError) throw this.openError;
    const u = new MemoryUpload();
    this.uploads.set(id, u);
    return u;
  }
  async writeRecord(s: RecordingSummary): Promise<void> {
    this.records.push(s);
  }
  async close(): Promise<void> {}
}

/** What the relay saw of one connection. */
export interface RelayedConnection {
  requestHead: string;
  responseHead: string;
  /** Bytes after the heads, in the order read, per direction. */
  fromClient: Buffer[];
  fromUpstream: Buffer[];
  observer: RelayObserver | undefined;
  closed: Promise<void>;
  /** sha256 of the bytes after the heads, hashed as they arrived (before any observer saw them). */
  clientSha256AtReceipt(): string;
  upstreamSha256AtReceipt(): string;
}

/** The relay. */
export interface RecordingRelay {
  url: string;
  connections: RelayedConnection[];
  close(): Promise<void>;
}

const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Relay to `target` (host:port). For an upgrade answered 101, `observe(requestHead, responseHead)`
 * may return an observer, which then gets every later chunk of both directions and `close` at the end.
 */
export async function startRecordingRelay(target: { host: string; port: number }, observe: (requestHead: string, responseHead: string) => RelayObserver | undefined = () => undefined): Promise<RecordingRelay> {
  const connections: RelayedConnection[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    let resolveClosed!: () => void;
    const hc = createHash('sha256');
    const hu = createHash('sha256');
    const c: RelayedConnection = {
      requestHead: '',
      responseHead: '',
      fromClient: [],
      fromUpstream: [],
      observer: undefined,
      closed: new Promise((r) => (resolveClosed = r)),
      clientSha256AtReceipt: () => hc.copy().digest('hex'),
      upstreamSha256AtReceipt: () => hu.copy().digest('hex'),
    };
    connections.push(c);
    let reqHead: Buffer | undefined = Buffer.alloc(0);
    let resHead: Buffer | undefined = Buffer.alloc(0);
    const early: Buffer[] = []; // client bytes after its head, before the response head
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      if (reqHead !== undefined) {
        reqHead = Buffer.concat([reqHead, chunk]);
        const at = reqHead.indexOf(HEAD_END);
        if (at < 0) return;
        c.requestHead = reqHead.subarray(0, at).toString('latin1');
        const rest = reqHead.subarray(at + 4);
        reqHead = undefined;
        if (rest.length > 0) {
          hc.update(rest);
          c.fromClient.push(rest);
          early.push(rest);
        }
        return;
      }
      hc.update(chunk);
      c.fromClient.push(chunk);
      if (resHead !== undefined) early.push(chunk);
      else c.observer?.fromClient(chunk);
    });
    let plan: TerminationPlan | undefined;
    const finishPlan = (): void => {
      client.write(plan!.bytes);
      client.end();
      upstream.destroy();
    };
    upstream.on('data', (chunk: Buffer) => {
      if (plan) {
        // Enforce end in progress: the rest of the frame, then the Status, then close.
        const { forward, done } = plan.cut(chunk);
        client.write(forward);
        if (done) finishPlan();
        return;
      }
      client.write(chunk);
      if (resHead !== undefined) {
        resHead = Buffer.concat([resHead, chunk]);
        const at = resHead.indexOf(HEAD_END);
        if (at < 0) return;
        c.responseHead = resHead.subarray(0, at).toString('latin1');
        const rest = resHead.subarray(at + 4);
        resHead = undefined;
        if (/^HTTP\/1\.1 101/.test(c.responseHead)) c.observer = observe(c.requestHead, c.responseHead);
        // What the proxy's relay will do on an enforced recording's failure (docs/recording.md, "Wiring").
        c.observer?.fatal.addEventListener('abort', () => {
          const reason = c.observer!.fatal.reason as { toStatus(): V1Status };
          const p = c.observer!.terminate(reason.toStatus());
          if (!p) return void (client.destroy(), upstream.destroy());
          plan = p;
          if (p.cut(Buffer.alloc(0)).done) finishPlan();
          setTimeout(() => (client.destroy(), upstream.destroy()), 1000).unref();
        });
        for (const e of early.splice(0)) c.observer?.fromClient(e);
        if (rest.length > 0) {
          hu.update(rest);
          c.fromUpstream.push(rest);
          c.observer?.fromUpstream(rest);
        }
        return;
      }
      hu.update(chunk);
      c.fromUpstream.push(chunk);
      c.observer?.fromUpstream(chunk);
    });
    let ended = 0;
    const end = (): void => {
      if (++ended !== 1) return;
      client.end();
      upstream.end();
      c.observer?.close();
      resolveClosed();
    };
    for (const s of [client, upstream]) {
      s.on('end', end);
      s.on('close', end);
      s.on('error', end);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A header's value in a raw HTTP head (case-insensitive), or undefined. */
export function headValue(head: string, name: string): string | undefined {
  const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(head);
  return m?.[1]?.trim();
}

/** The query of the request line of a raw HTTP request head. */
export function requestQuery(head: string): URLSearchParams {
  const target = head.split(' ')[1] ?? '/';
  return new URL(target, 'http://x').searchParams;
}
