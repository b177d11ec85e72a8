/**
 * The taps under arbitrary bytes (issue 31, finding 2). SPDY and WebSocket sessions made of valid
 * frames mixed with random and mutated bytes, split at random boundaries, go through the proxy's own
 * splice relay (`proxy/splice.ts`) into a recorded session, enforce and fail open. Whatever the bytes:
 *
 * - never `result: complete` with less than the client received: a complete recording was handed
 *   exactly the stdout/stderr bytes that a client reading the relayed bytes got, and its cast's
 *   output events hold them. The client is a reader independent of the taps: SPDY, the framing
 *   every SPDY/3 reader shares (8 bytes, then the length) with DATA delivered by stream id, the ids
 *   being those the client itself opened as stdout and stderr; WebSocket, a strict RFC 6455 reader
 *   (streaming, as gorilla/websocket under client-go delivers), itself checked message by message
 *   against `ws`'s own Receiver.
 * - enforce: a tap that could not read the stream ended the session (`terminated`), and the client
 *   read the Status on the error stream (then GOAWAY) whenever the upstream's own bytes left a frame
 *   boundary to put it at; fail open: the marker, `result: incomplete`, the counter.
 *
 * The relay runs over in-memory duplex pairs so each generated chunk is one read of the relay (the
 * split points are the generated ones); each write is followed by one event-loop turn, which is when
 * an in-memory push has been read.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Duplex } from 'node:stream';
import zlib from 'node:zlib';
import { isUtf8 } from 'node:buffer';
import { TextDecoder } from 'node:util';
import { Registry } from 'prom-client';
import * as wsModule from 'ws';
import { spliceSockets } from '../../../proxy/splice.js';
import { relayObserverFor } from '../../../src/recording/relay-observer.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { SPDY3_DICTIONARY } from '../../../src/spdy/dictionary.js';
import { encodeFrame, FrameParser, type SpdyFrame } from '../../../src/spdy/frame.js';
import { counterValue } from '../../helpers/metrics.js';
import { waitFor } from '../../helpers/wait.js';
import { MemoryUpload } from './recording-fixture.js';

type Out = 'stdout' | 'stderr';
/** The values an arbitrary generates. */
type Of<A> = A extends fc.Arbitrary<infer T> ? T : never;

/** A recording that also keeps the output bytes it is handed (what the cast's `o` events are made of). */
class CapturingRecording extends SessionRecording {
  readonly handed: Array<[Out, Buffer]> = [];
  override output(stream: Out, data: Buffer): void {
    this.handed.push([stream, Buffer.from(data)]);
    super.output(stream, data);
  }
}

/** Two connected in-memory ends: each write is one chunk read on the other end; end and destroy are EOF there. */
function duplexPair(): [Duplex, Duplex] {
  const ends: Duplex[] = [];
  const eof = new Set<Duplex>();
  const deliver = (to: Duplex, chunk: Buffer | null): void => {
    if (eof.has(to) || to.destroyed) return;
    if (chunk === null) eof.add(to);
    to.push(chunk);
  };
  for (const i of [0, 1]) {
    ends.push(
      new Duplex({
        read() {},
        write(chunk: Buffer, _enc, cb) {
          deliver(ends[1 - i]!, chunk);
          cb();
        },
        final(cb) {
          deliver(ends[1 - i]!, null);
          cb();
        },
        destroy(err, cb) {
          deliver(ends[1 - i]!, null);
          cb(err);
        },
      }),
    );
  }
  return [ends[0]!, ends[1]!];
}

interface Outcome {
  received: Buffer;
  result: string;
  handed: Array<[Out, Buffer]>;
  unreadable: number;
  refusals: number;
  markers: string[];
  castOutput: string;
}

/** One session through the splice relay: `steps` in order (client or upstream chunks), then the upstream ends. */
async function relaySession(kind: 'spdy' | 'websocket', protocol: string, enforce: boolean, steps: Array<['client' | 'upstream', Buffer]>): Promise<Outcome> {
  const registry = new Registry();
  const upload = new MemoryUpload();
  const recording = new CapturingRecording({
    identity: { sessionId: newRecordingId(), namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'], tty: true, record: 'full' },
    enforce,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(registry),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  const [client, proxyClient] = duplexPair();
  const [proxyUpstream, upstream] = duplexPair();
  const received: Buffer[] = [];
  client.on('data', (c: Buffer) => received.push(c));
  const clientEnded = new Promise<void>((r) => client.on('end', r));
  upstream.on('data', () => undefined);
  const tap = relayObserverFor(recording, { kind, subprotocol: protocol });
  const splice = spliceSockets(proxyClient, proxyUpstream, { maxBytesPerSec: 0, observer: tap });
  let ended = false;
  void splice.done.then(() => (ended = true));
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
  for (const [side, chunk] of steps) {
    if (ended) break;
    (side === 'client' ? client : upstream).write(chunk);
    await turn();
  }
  // Header blocks still inflating may still fail the tap: let them, then end from the upstream.
  await waitFor('the tap settled', async () => ('inflating' in tap && (tap as { inflating: boolean }).inflating ? undefined : true), 10_000, 1);
  await turn();
  if (!ended) upstream.end();
  await splice.done;
  await clientEnded;
  const summary = await recording.whenFinished();
  const metrics = await registry.metrics();
  const events = upload.parsed().events;
  return {
    received: Buffer.concat(received),
    result: summary.result,
    handed: recording.handed,
    unreadable: counterValue(metrics, 'kube_stream_proxy_session_recording_unreadable_streams_total'),
    refusals: counterValue(metrics, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' }),
    markers: events.filter((e) => e[1] === 'm').map((e) => e[2]),
    castOutput: events.filter((e) => e[1] === 'o').map((e) => e[2]).join(''),
  };
}

const per = (pieces: Array<[Out, Buffer]>, s: Out): Buffer => Buffer.concat(pieces.filter(([t]) => t === s).map(([, b]) => b));

/** Runs that ended each way (both must be exercised, or the property proves nothing). */
const seen = { failed: 0, complete: 0 };

/** What every run must show, whatever the bytes (`clientGot`: the reference client's stdout/stderr). */
function checkOutcome(o: Outcome, enforce: boolean, clientGot: Array<[Out, Buffer]>): void {
  const failed = o.unreadable > 0;
  seen[failed ? 'failed' : 'complete']++;
  expect(o.unreadable).toBeLessThanOrEqual(1);
  if (enforce) {
    expect(o.result).toBe(failed ? 'terminated' : 'complete');
    expect(o.refusals).toBe(failed ? 1 : 0);
  } else {
    expect(o.result).toBe(failed ? 'incomplete' : 'complete');
    expect(o.refusals).toBe(0);
  }
  expect(o.markers.some((m) => m.startsWith('recording stopped: '))).toBe(failed);
  if (failed) return;
  // Complete: exactly what the client got, stream by stream, and the cast's output events hold it.
  for (const s of ['stdout', 'stderr'] as const) expect(per(o.handed, s)).toEqual(per(clientGot, s));
  const handed = Buffer.concat(o.handed.map(([, b]) => b));
  if (handed.every((b) => b >= 0x20 && b < 0x7f)) expect(o.castOutput).toBe(handed.toString('latin1'));
}

/** Random split points of `b`. */
function split(b: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (b.length + 1)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of [...at, b.length]) {
    if (c > from) out.push(b.subarray(from, c));
    from = c;
  }
  return out;
}

/** Random bytes inserted and bytes flipped. */
function mutate(b: Buffer, inserts: Array<[number, Uint8Array]>, flips: Array<[number, number]>): Buffer {
  let out = Buffer.from(b);
  for (const [at, bytes] of inserts) {
    const i = at % (out.length + 1);
    out = Buffer.concat([out.subarray(0, i), Buffer.from(bytes), out.subarray(i)]);
  }
  for (const [at, x] of flips) if (out.length > 0) out[at % out.length]! ^= x || 1;
  return out;
}

/** Interleave the chunks of both sides by `order` (true: the client's next chunk), keeping each side's order. */
function interleave(client: Buffer[], upstream: Buffer[], order: boolean[]): Array<['client' | 'upstream', Buffer]> {
  const out: Array<['client' | 'upstream', Buffer]> = [];
  let c = 0;
  let u = 0;
  for (let i = 0; c < client.length || u < upstream.length; i++) {
    const takeClient = u >= upstream.length || (c < client.length && (order[i % Math.max(order.length, 1)] ?? false));
    out.push(takeClient ? ['client', client[c++]!] : ['upstream', upstream[u++]!]);
  }
  return out;
}

const mutations = fc.record({
  inserts: fc.array(fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 12 })), { maxLength: 2 }),
  flips: fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 2 }),
});
const cuts = fc.array(fc.nat(), { maxLength: 12 });

// ---------------------------------------------------------------------------------------------------
// SPDY (passthrough exec, the splice path): the client opens its streams (kubectl's header
// compression: one deflate context, a sync flush per block), then stdin/resize and the upstream's
// replies and output interleave.

type StreamType = 'error' | 'stdin' | 'stdout' | 'stderr' | 'resize';

/** Header blocks as kubectl writes them (Go compress/zlib, one context, a sync flush per block), over raw pairs. */
async function compressBlocks(blocks: Array<Array<[string, string]>>): Promise<Buffer[]> {
  const deflate = zlib.createDeflate({ dictionary: SPDY3_DICTIONARY });
  const chunks: Buffer[] = [];
  deflate.on('data', (c: Buffer) => chunks.push(c));
  const u32 = (n: number): Buffer => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
  const out: Buffer[] = [];
  for (const pairs of blocks) {
    deflate.write(Buffer.concat([u32(pairs.length), ...pairs.flatMap(([n, v]) => [u32(Buffer.byteLength(n)), Buffer.from(n), u32(Buffer.byteLength(v)), Buffer.from(v)])]));
    await new Promise<void>((r) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
    out.push(Buffer.concat(chunks.splice(0)));
  }
  deflate.close();
  return out;
}

const frameBytes = (f: SpdyFrame): Buffer => Buffer.concat(encodeFrame(f));

/** Frames no SPDY reader can follow (a known control type of the wrong length, DATA on stream 0, a header block that does not inflate). */
const UNREADABLE_SPDY = [
  Buffer.from([0x80, 0x03, 0x00, 0x03, 0, 0, 0, 0]), // RST_STREAM, no payload
  Buffer.from([0x80, 0x03, 0x00, 0x06, 0, 0, 0, 3, 0, 0, 1]), // PING of 3 bytes
  Buffer.from([0, 0, 0, 0, 0, 0, 0, 1, 0x41]), // DATA on stream 0
  Buffer.from([0x80, 0x03, 0x00, 0x01, 0, 0, 0, 14, 0, 0, 0, 0x41, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]), // SYN_STREAM, a block that does not inflate
  Buffer.from([0x80, 0x03, 0x00, 0x08, 0, 0, 0, 2, 0, 1]), // HEADERS of 2 bytes
];
const spdyMutations = fc.record({
  inserts: fc.array(fc.tuple(fc.nat(), fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 12 }), fc.constantFrom(...UNREADABLE_SPDY))), { maxLength: 2 }),
  flips: fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 2 }),
});

const spdyPlan = fc.record({
  optional: fc.subarray(['stdin', 'resize'] as StreamType[]),
  order: fc.array(fc.nat(), { minLength: 5, maxLength: 5 }),
  /** Per stream: a repeated streamtype after the real one, a NUL-joined value, extra pairs first or last. */
  headers: fc.array(
    fc.record({
      repeat: fc.option(fc.constantFrom('stdin', 'stdout', 'stderr', 'resize', 'error', 'x')),
      joined: fc.boolean(),
      extra: fc.array(fc.tuple(fc.constantFrom('port', 'x-a', 'streamtypes', ''), fc.string({ maxLength: 6 })), { maxLength: 2 }),
      extraFirst: fc.boolean(),
      version: fc.constantFrom(3, 3, 3, 2),
    }),
    { minLength: 5, maxLength: 5 },
  ),
  clientReply: fc.boolean(),
  reuse: fc.option(fc.constantFrom<StreamType>('stdin', 'stdout', 'stderr', 'resize')),
  stdin: fc.array(fc.uint8Array({ maxLength: 20 }), { maxLength: 3 }),
  upstream: fc.array(
    fc.oneof(
      fc.record({ kind: fc.constant('data' as const), to: fc.constantFrom<StreamType | 'unknown'>('stdout', 'stdout', 'stderr', 'error', 'stdin', 'unknown'), data: fc.uint8Array({ maxLength: 40 }), fin: fc.boolean() }),
      fc.record({ kind: fc.constant('control' as const), frame: fc.constantFrom('ping', 'window_update', 'settings', 'unknown', 'syn_reply') }),
    ),
    { maxLength: 10 },
  ),
  /** A frame no reader can follow, between two frames of one side. */
  unreadable: fc.option(fc.record({ side: fc.constantFrom('client', 'upstream'), at: fc.nat(), frame: fc.constantFrom(...UNREADABLE_SPDY) }), { freq: 2 }),
  clientMutations: fc.option(spdyMutations, { freq: 3 }),
  upstreamMutations: fc.option(spdyMutations, { freq: 3 }),
  clientCuts: cuts,
  upstreamCuts: cuts,
  order2: fc.array(fc.boolean(), { maxLength: 20 }),
});

/** The client's view of the relayed bytes: SPDY/3 framing (8 bytes, then the length), DATA of its own stdout/stderr ids. */
function spdyClientView(bytes: Buffer, types: Map<number, StreamType>): { got: Array<[Out, Buffer]>; clean: boolean; frames: Array<{ control: boolean; id: number; type: number; fin: boolean; payload: Buffer }> } {
  const got: Array<[Out, Buffer]> = [];
  const frames: Array<{ control: boolean; id: number; type: number; fin: boolean; payload: Buffer }> = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 8) return { got, clean: false, frames };
    const word = bytes.readUInt32BE(at);
    const control = (word & 0x80000000) !== 0;
    const len = bytes.readUInt32BE(at + 4) & 0xffffff;
    const payload = bytes.subarray(at + 8, at + 8 + len);
    const t = control ? undefined : types.get(word & 0x7fffffff);
    // A DATA frame's bytes as they arrive (the tap records them so; spdystream hands a frame on whole).
    if ((t === 'stdout' || t === 'stderr') && payload.length > 0) got.push([t, payload]);
    if (payload.length < len) return { got, clean: false, frames };
    const id = !control ? word & 0x7fffffff : payload.length >= 4 ? payload.readUInt32BE(0) & 0x7fffffff : 0;
    frames.push({ control, id, type: control ? word & 0xffff : -1, fin: (bytes[at + 4]! & 1) === 1, payload });
    at += 8 + len;
  }
  return { got, clean: true, frames };
}

async function spdyRun(p: Of<typeof spdyPlan>, enforce: boolean): Promise<void> {
  const all: StreamType[] = ['error', 'stdout', 'stderr', ...p.optional];
  const types = all.map((t, i) => [t, p.order[i]!] as const).sort((a, b) => a[1] - b[1]).map(([t]) => t);
  // The client's header frames in wire order (one deflate context: compressed in that order).
  const wire: Array<{ kind: 'syn_stream' | 'syn_reply'; id: number; version: number; pairs: Array<[string, string]> }> = [];
  const map = new Map<number, StreamType>();
  types.forEach((t, i) => {
    const h = p.headers[i]!;
    const own: Array<[string, string]> = [['streamtype', h.joined ? `${t}\0stdin` : t], ...(h.repeat !== null ? [['streamtype', h.repeat] as [string, string]] : [])];
    map.set(1 + 2 * i, t);
    wire.push({ kind: 'syn_stream', id: 1 + 2 * i, version: h.version, pairs: h.extraFirst ? [...h.extra, ...own] : [...own, ...h.extra] });
    // A SYN_REPLY from the client after the first stream: the kubelet inflates its block too.
    if (i === 0 && p.clientReply) wire.push({ kind: 'syn_reply', id: 1, version: 3, pairs: [['streamtype', 'stdout'], ['streamtype', 'stdin']] });
  });
  // A SYN_STREAM reusing an id: the kubelet refuses it, the stream keeps its type.
  if (p.reuse !== null) wire.push({ kind: 'syn_stream', id: 3, version: 3, pairs: [['streamtype', p.reuse]] });
  const compressed = await compressBlocks(wire.map((w) => w.pairs));
  const setup = wire.map((w, i) => {
    const f =
      w.kind === 'syn_stream'
        ? frameBytes({ type: 'syn_stream', streamId: w.id, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: compressed[i]! })
        : frameBytes({ type: 'syn_reply', streamId: w.id, fin: false, headerBlock: compressed[i]! });
    f.writeUInt16BE(0x8000 | w.version, 0);
    return f;
  });
  const idOf = (t: StreamType | 'unknown'): number => (t === 'unknown' ? 99 : ([...map].find(([, v]) => v === t)?.[0] ?? 97));
  const between = (frames: Buffer[], side: 'client' | 'upstream'): Buffer => {
    const u = p.unreadable;
    if (u !== null && u.side === side) frames.splice(u.at % (frames.length + 1), 0, u.frame);
    return Buffer.concat(frames);
  };
  let rest = between(
    [
      ...p.stdin.map((d) => frameBytes({ type: 'data', streamId: idOf('stdin'), fin: false, data: Buffer.from(d) })),
      ...(types.includes('resize') ? [frameBytes({ type: 'data', streamId: idOf('resize'), fin: false, data: Buffer.from('{"Width":100,"Height":30}') })] : []),
    ],
    'client',
  );
  if (p.clientMutations) rest = mutate(rest, p.clientMutations.inserts, p.clientMutations.flips);
  let up = between([
    ...types.map((_, i) => frameBytes({ type: 'syn_reply', streamId: 1 + 2 * i, fin: false, headerBlock: Buffer.from([0x78, 0xbb]) })),
    ...p.upstream.map((u) => {
      if (u.kind === 'data') return frameBytes({ type: 'data', streamId: idOf(u.to), fin: u.fin, data: Buffer.from(u.data) });
      switch (u.frame) {
        case 'ping':
          return frameBytes({ type: 'ping', id: 2 });
        case 'window_update':
          return frameBytes({ type: 'window_update', streamId: 3, delta: 1000 });
        case 'settings':
          return frameBytes({ type: 'settings', clearSettings: false, entries: [{ flags: 0, id: 7, value: 1 }] });
        case 'syn_reply':
          return frameBytes({ type: 'syn_reply', streamId: 3, fin: false, headerBlock: Buffer.from('junk') });
        default:
          return Buffer.from([0x80, 0x03, 0x00, 0x0f, 0, 0, 0, 2, 1, 2]); // an unknown control frame type
      }
    }),
  ], 'upstream');
  if (p.upstreamMutations) up = mutate(up, p.upstreamMutations.inserts, p.upstreamMutations.flips);
  const steps: Array<['client' | 'upstream', Buffer]> = [
    ...setup.map((b) => ['client', b] as ['client', Buffer]),
    ...interleave(split(rest, p.clientCuts), split(up, p.upstreamCuts), p.order2),
  ];
  const o = await relaySession('spdy', 'v4.channel.k8s.io', enforce, steps);
  const view = spdyClientView(o.received, map);
  checkOutcome(o, enforce, view.got);
  // Without random bytes every frame is one the kubelet and kubectl read: the tap reads it too.
  if (!p.clientMutations && !p.upstreamMutations && !p.unreadable) expect(o.unreadable).toBe(0);
  if (!enforce || o.unreadable === 0) return;
  // Ended with the Status, wherever the upstream's own bytes left a frame boundary for it.
  let upstreamReadable = true;
  try {
    const parser = new FrameParser({ anyVersion: true });
    parser.push(up);
    if (parser.hasPendingError) parser.push(Buffer.alloc(0));
  } catch {
    upstreamReadable = false;
  }
  if (!view.clean || !upstreamReadable) return;
  const last = view.frames.at(-1);
  expect(last && last.control && last.type === 7).toBe(true); // GOAWAY
  const status = view.frames.find((f) => !f.control && f.id === idOf('error') && f.fin && f.payload.includes('session recording unavailable'));
  expect(status).toBeDefined();
  expect(JSON.parse(status!.payload.toString())).toMatchObject({ kind: 'Status', code: 503, message: 'session recording unavailable' });
}

// ---------------------------------------------------------------------------------------------------
// WebSocket (v1–v5 passthrough): client frames masked (stdin, resize, pings, fragments, reserved
// opcodes), server messages on channels 1–3 (fragmented, pings between fragments), a close.

const WS_PROTOCOLS = ['v4.channel.k8s.io', 'channel.k8s.io', 'v4.base64.channel.k8s.io', 'base64.channel.k8s.io', 'v5.channel.k8s.io'];

/** One frame: `b0` (FIN, RSV, opcode) as given, masked with `mask` when given. */
function wsFrame(b0: number, payload: Buffer, mask?: Buffer): Buffer {
  const n = payload.length;
  const m = mask ? 0x80 : 0;
  const len = n < 126 ? Buffer.from([n | m]) : n < 65536 ? Buffer.from([126 | m, n >> 8, n & 255]) : Buffer.from([127 | m, 0, 0, 0, 0, n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
  const body = mask ? Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!)) : payload;
  return Buffer.concat([Buffer.from([b0]), len, ...(mask ? [mask] : []), body]);
}

const wsPlan = fc.record({
  protocol: fc.constantFrom(...WS_PROTOCOLS),
  client: fc.array(
    fc.record({ channel: fc.constantFrom(0, 0, 4, 9), data: fc.uint8Array({ maxLength: 16 }), opcode: fc.constantFrom(2, 2, 1, 0, 3, 11, 9), fin: fc.boolean() }),
    { maxLength: 6 },
  ),
  server: fc.array(
    fc.record({
      channel: fc.constantFrom(1, 1, 2, 3, 7),
      data: fc.uint8Array({ maxLength: 40 }),
      fragments: fc.array(fc.nat(40), { maxLength: 2 }),
      pingBetween: fc.boolean(),
      text: fc.boolean(),
    }),
    { maxLength: 8 },
  ),
  close: fc.boolean(),
  mask: fc.uint8Array({ minLength: 4, maxLength: 4 }),
  clientMutations: fc.option(mutations, { freq: 3 }),
  upstreamMutations: fc.option(mutations, { freq: 3 }),
  clientCuts: cuts,
  upstreamCuts: cuts,
  order: fc.array(fc.boolean(), { maxLength: 20 }),
});

/** What a strict RFC 6455 client made of the bytes. */
interface WsView {
  /** stdout/stderr bytes, streaming (a message's bytes as they arrive, its first byte the channel). */
  got: Array<[Out, Buffer]>;
  /** Complete messages (binary?, payload), as `ws` emits them. */
  messages: Array<[boolean, Buffer]>;
  /** It failed the connection, as `ws` does. */
  error: boolean;
  /** The bytes end inside a text message that is already not UTF-8 (a client fails once it ends). */
  badTextSoFar: boolean;
}

function wsClientView(bytes: Buffer, base64: boolean): WsView {
  const view: WsView = { got: [], messages: [], error: false, badTextSoFar: false };
  let at = 0;
  let opcode = 0;
  let parts: Buffer[] = [];
  const demux = (m: Buffer, whole: boolean): void => {
    if (m.length === 0) return;
    const ch = base64 ? m[0]! - 0x30 : m[0]!;
    if (ch !== 1 && ch !== 2) return;
    const rest = m.subarray(1);
    let bytes = rest;
    if (base64 && !whole) {
      // Cut short: what its whole 4-character groups decode to (all of it once an `=` ended the text).
      const raw = rest.toString('latin1');
      const eq = raw.indexOf('=');
      const text = (eq >= 0 ? raw.slice(0, eq) : raw).replace(/[^A-Za-z0-9+/_-]/g, '');
      bytes = Buffer.from(eq >= 0 ? text : text.slice(0, text.length - (text.length % 4)), 'base64');
    } else if (base64) bytes = Buffer.from(rest.toString('latin1'), 'base64');
    if (bytes.length > 0) view.got.push([ch === 1 ? 'stdout' : 'stderr', bytes]);
  };
  /** The bytes end (or a close frame came): a message in progress gave what arrived of it. */
  const stop = (): WsView => {
    if (opcode === 0) return view;
    const m = Buffer.concat(parts);
    if (opcode === 1) {
      try {
        new TextDecoder('utf-8', { fatal: true }).decode(m, { stream: true });
      } catch {
        view.badTextSoFar = true;
        return view;
      }
    }
    demux(m, false);
    return view;
  };
  const fail = (): WsView => ((view.error = true), view);
  for (;;) {
    if (bytes.length - at < 2) return at === bytes.length ? view : stop();
    const b0 = bytes[at]!;
    const b1 = bytes[at + 1]!;
    let p = at + 2;
    if ((b0 & 0x70) !== 0 || (b1 & 0x80) !== 0) return fail();
    const fin = (b0 & 0x80) !== 0;
    const op = b0 & 15;
    let len = b1 & 127;
    if (len === 126) {
      if (bytes.length - p < 2) return stop();
      len = bytes.readUInt16BE(p);
      p += 2;
    } else if (len === 127) {
      if (bytes.length - p < 8) return stop();
      const hi = bytes.readUInt32BE(p);
      if (hi > 0x1fffff) return fail();
      len = hi * 2 ** 32 + bytes.readUInt32BE(p + 4);
      p += 8;
    }
    if (op >= 8 && op <= 10) {
      if (!fin || len > 125 || (op === 8 && len === 1)) return fail();
    } else if (op === 0) {
      if (opcode === 0) return fail();
    } else if (op === 1 || op === 2) {
      if (opcode !== 0) return fail();
      opcode = op;
      parts = [];
    } else return fail();
    const payload = bytes.subarray(p, p + len);
    if (op >= 8) {
      if (payload.length < len) return stop();
      if (op === 8) {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        const validCode = (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999);
        return payload.length === 0 || (validCode && isUtf8(payload.subarray(2))) ? stop() : fail();
      }
      at = p + len;
      continue;
    }
    parts.push(payload);
    if (payload.length < len) return stop();
    at = p + len;
    if (!fin) continue;
    const m = Buffer.concat(parts);
    if (opcode === 1 && !isUtf8(m)) return fail();
    view.messages.push([opcode === 2, m]);
    demux(m, true);
    opcode = 0;
  }
}

/** `ws`'s own Receiver (client side) on the same bytes: its messages, and whether it failed (reported a turn later). */
async function wsReceiverView(bytes: Buffer): Promise<{ messages: Array<[boolean, Buffer]>; error: boolean }> {
  const messages: Array<[boolean, Buffer]> = [];
  let error = false;
  const Receiver = (wsModule as unknown as { Receiver: unknown }).Receiver;
  const r = new (Receiver as new (o: object) => NodeJS.WritableStream & { on(e: string, f: (...a: any[]) => void): void })({ isServer: false, binaryType: 'nodebuffer', allowSynchronousEvents: true });
  r.on('message', (data: Buffer, isBinary: boolean) => messages.push([isBinary, Buffer.from(data)]));
  r.on('error', () => (error = true));
  r.on('conclude', () => undefined);
  r.write(bytes);
  await new Promise((resolve) => setImmediate(resolve));
  return { messages, error };
}

async function wsRun(p: Of<typeof wsPlan>, enforce: boolean): Promise<void> {
  const base64 = p.protocol.includes('base64');
  const mask = Buffer.from(p.mask);
  const encode = (ch: number, data: Buffer): Buffer => (base64 ? Buffer.from(String.fromCharCode(0x30 + ch) + data.toString('base64')) : Buffer.concat([Buffer.from([ch]), data]));
  let client: Buffer = Buffer.concat(p.client.map((c) => wsFrame((c.fin ? 0x80 : 0) | c.opcode, encode(c.channel, Buffer.from(c.data)), mask)));
  if (p.clientMutations) client = mutate(client, p.clientMutations.inserts, p.clientMutations.flips);
  const serverFrames: Buffer[] = [];
  for (const m of p.server) {
    const payload = encode(m.channel, Buffer.from(m.data));
    const op = base64 || m.text ? 1 : 2;
    const at = [...new Set(m.fragments.map((f) => f % (payload.length + 1)))].sort((a, b) => a - b).filter((f) => f > 0 && f < payload.length);
    const pieces = split(payload, at);
    if (pieces.length === 0) pieces.push(Buffer.alloc(0));
    pieces.forEach((piece, i) => {
      serverFrames.push(wsFrame((i === pieces.length - 1 ? 0x80 : 0) | (i === 0 ? op : 0), piece));
      if (m.pingBetween && i < pieces.length - 1) serverFrames.push(wsFrame(0x89, Buffer.from('p')));
    });
  }
  if (p.close) serverFrames.push(wsFrame(0x88, Buffer.from([0x03, 0xe8])));
  let up: Buffer = Buffer.concat(serverFrames);
  if (p.upstreamMutations) up = mutate(up, p.upstreamMutations.inserts, p.upstreamMutations.flips);
  const o = await relaySession('websocket', p.protocol, enforce, interleave(split(client, p.clientCuts), split(up, p.upstreamCuts), p.order));
  const view = wsClientView(o.received, base64);
  // The reference reads as ws does, message for message.
  const ws = await wsReceiverView(o.received);
  expect(view.messages).toEqual(ws.messages);
  expect(view.error).toBe(ws.error);
  // Server bytes a client cannot read are exactly the bytes the tap cannot read.
  const sent = wsClientView(up, base64);
  expect(o.unreadable === 1).toBe(sent.error || sent.badTextSoFar);
  checkOutcome(o, enforce, view.got);
}

describe('taps under arbitrary bytes: never complete with less; enforce ends with the Status; fail open marks it', () => {
  it.each([true, false])('SPDY (enforce: %s)', async (enforce) => {
    seen.failed = seen.complete = 0;
    await fc.assert(fc.asyncProperty(spdyPlan, (p) => spdyRun(p, enforce)), { numRuns: 150 });
    expect(seen.failed).toBeGreaterThan(15);
    expect(seen.complete).toBeGreaterThan(15);
  }, 120_000);

  it.each([true, false])('WebSocket v1–v5, binary and base64 (enforce: %s)', async (enforce) => {
    seen.failed = seen.complete = 0;
    await fc.assert(fc.asyncProperty(wsPlan, (p) => wsRun(p, enforce)), { numRuns: 200 });
    expect(seen.failed).toBeGreaterThan(20);
    expect(seen.complete).toBeGreaterThan(20);
  }, 120_000);
});
