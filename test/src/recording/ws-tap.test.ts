/**
 * The WebSocket tap: the frame reader under both reading rules (masking without modifying the input,
 * fragmentation with a control frame between fragments, splits at every byte), client frames read
 * as the kubelet's x/net/websocket reads them and server frames as a client does (issue 31: what a
 * client refuses makes the stream unreadable — enforce ends the session, fail open marks it), and the
 * tap on real dev-cluster sessions for every legacy subprotocol (binary and base64, v1 and v4).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import WebSocket from 'ws';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { unmaskedCopy, WsFrameReader, type WsReadingRules } from '../../../src/recording/ws-frame-reader.js';
import { Base64Pieces, WebSocketTap } from '../../../src/recording/ws-tap.js';
import { STDERR_END, STDERR_START } from '../../../src/recording/asciicast.js';
import { RecordingUnavailableError } from '../../../src/recording/recording-errors.js';
import { errorStatus } from '../../../src/status.js';
import { counterValue } from '../../helpers/metrics.js';
import { headValue, MemoryUpload, startRecordingRelay } from './recording-fixture.js';

/** One client (masked) or server frame. */
function frame(opcode: number, payload: Buffer, fin = true, mask?: Buffer): Buffer {
  const n = payload.length;
  const len = n < 126 ? Buffer.from([n | (mask ? 0x80 : 0)]) : Buffer.from([126 | (mask ? 0x80 : 0), n >> 8, n & 0xff]);
  const body = mask ? Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!)) : payload;
  return Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | opcode]), len, ...(mask ? [mask] : []), body]);
}

function collect(stream: Buffer, chunkSize: number, rules: WsReadingRules): { messages: Array<[number, string]>; closes: number } {
  const messages: Array<[number, string]> = [];
  let current: Buffer[] = [];
  let closes = 0;
  const reader = new WsFrameReader(
    {
      data(op, piece, mask, offset, first, fin) {
        if (first) current = [];
        current.push(unmaskedCopy(piece, mask, offset));
        if (fin) messages.push([op, Buffer.concat(current).toString()]);
      },
      close: () => closes++,
    },
    rules,
  );
  for (let i = 0; i < stream.length; i += chunkSize) reader.push(stream.subarray(i, i + chunkSize));
  expect(reader.bytesToFrameEnd).toBe(0);
  return { messages, closes };
}

describe('WsFrameReader', () => {
  const mask = Buffer.from([0x11, 0x22, 0x33, 0x44]);
  const big = Buffer.alloc(300, 'y');
  const frames = (m: Buffer | undefined): Buffer =>
    Buffer.concat([
      frame(2, Buffer.from('\x00hello'), true, m),
      frame(1, Buffer.from('frag-'), false, m),
      frame(9, Buffer.from('ping'), true, m), // a control frame between fragments
      frame(0, Buffer.from('ment'), true, m),
      frame(2, Buffer.alloc(0), true, m),
      frame(2, big, true, m),
      frame(8, Buffer.from([0x03, 0xe8]), true, m),
      frame(2, Buffer.from('after the close'), true, m),
    ]);
  const server = frames(undefined);
  const client = frames(mask);

  it.each([1, 2, 3, 5, 64, server.length])('rfc6455-client, split every %i bytes: messages across fragments, nothing after the close, the input unchanged', (size) => {
    const before = Buffer.from(server);
    const { messages, closes } = collect(server, size, 'rfc6455-client');
    expect(messages).toEqual([
      [2, '\x00hello'],
      [1, 'frag-ment'],
      [2, ''],
      [2, big.toString()],
    ]);
    expect(closes).toBe(1);
    expect(server.equals(before)).toBe(true);
  });

  it.each([1, 2, 3, 5, 64, client.length])('x-net-websocket-server, split every %i bytes: every frame on its own, nothing after the close, the input unchanged', (size) => {
    const before = Buffer.from(client);
    const { messages, closes } = collect(client, size, 'x-net-websocket-server');
    expect(messages).toEqual([
      [2, '\x00hello'],
      [1, 'frag-'],
      [1, 'ment'], // a continuation: the last data opcode, as x/net reports it
      [2, ''],
      [2, big.toString()],
    ]);
    expect(closes).toBe(1);
    expect(client.equals(before)).toBe(true);
  });

  it('bytesToFrameEnd: undefined mid-header, the payload left, 0 at a boundary', () => {
    const reader = new WsFrameReader({ data: () => undefined, close: () => undefined }, 'rfc6455-client');
    const f = frame(2, Buffer.from('abcdef'));
    reader.push(f.subarray(0, 1));
    expect(reader.bytesToFrameEnd).toBeUndefined();
    reader.push(f.subarray(1, 4));
    expect(reader.bytesToFrameEnd).toBe(4);
    reader.push(f.subarray(4));
    expect(reader.bytesToFrameEnd).toBe(0);
  });

  it('rfc6455-client: a reserved opcode is an error with ws\'s code (and stays one); x-net-websocket-server: data', () => {
    const reader = new WsFrameReader({ data: () => undefined, close: () => undefined }, 'rfc6455-client');
    expect(() => reader.push(Buffer.from([0x83, 0x00]))).toThrow(expect.objectContaining({ code: 'WS_ERR_INVALID_OPCODE', message: 'invalid opcode 3' }));
    expect(() => reader.push(Buffer.from([0x82, 0x00]))).toThrow(/invalid opcode 3/);
    expect(collect(frame(3, Buffer.from('x'), true, mask), 1, 'x-net-websocket-server').messages).toEqual([[3, 'x']]);
  });

  it('Base64Pieces: piece by piece, the bytes Node decodes from the whole text', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...'AQab09+/-_= \n!\u00e9'), { maxLength: 40 }), fc.array(fc.nat(40), { maxLength: 6 }), (chars, cuts) => {
        const text = chars.join('');
        const at = [...new Set(cuts.filter((c) => c < text.length))].sort((a, b) => a - b);
        const pieces = [0, ...at].map((from, i) => text.slice(from, [...at, text.length][i]));
        const d = new Base64Pieces();
        const got = Buffer.concat(pieces.map((p, i) => d.push(p, i === pieces.length - 1)));
        expect(got).toEqual(Buffer.from(text, 'base64'));
      }),
      { numRuns: 2000 },
    );
  });
});

function recording(tty: boolean, record: 'output' | 'full' = 'output', enforce = false): { rec: SessionRecording; upload: MemoryUpload; registry: Registry } {
  const upload = new MemoryUpload();
  const registry = new Registry();
  const rec = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'default', pod: 'demo', subresource: 'exec', command: ['sh'], tty, record },
    enforce,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(registry),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  return { rec, upload, registry };
}

const eventsOf = (upload: MemoryUpload, code: string): string => upload.parsed().events.filter((e) => e[1] === code).map((e) => e[2]).join('');
const MASK = Buffer.from([0x0f, 0xf0, 0x55, 0xaa]);
/** A raw frame head: first byte as given (FIN, RSV, opcode), then the length and mask. */
function rawFrame(b0: number, payload: Buffer, mask?: Buffer): Buffer {
  const f = frame(b0 & 0x0f, payload, (b0 & 0x80) !== 0, mask);
  f[0] = b0;
  return f;
}

describe('WebSocketTap reads client frames as the kubelet does (golang.org/x/net/websocket, wsstream)', () => {
  it('a reserved opcode is read as data (x/net returns the frame as is): stdin and the output after it are recorded', async () => {
    const { rec, upload } = recording(false, 'full', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: true });
    tap.fromClient(rawFrame(0x83, Buffer.from('\x00id\n'), MASK));
    tap.fromUpstream(frame(2, Buffer.from('\x01uid=0(root)\n')));
    tap.close();
    const s = await rec.whenFinished();
    expect(tap.failure).toBeUndefined();
    expect(eventsOf(upload, 'i')).toBe('id\n');
    expect(eventsOf(upload, 'o')).toBe('uid=0(root)\r\n');
    expect(s.result).toBe('complete');
  });

  it('each frame carries its own channel byte (x/net reads frames, not messages; FIN is ignored)', async () => {
    const { rec, upload } = recording(false, 'full', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: true });
    tap.fromClient(frame(2, Buffer.from('\x04{"Width":100,"Height":30}'), false, MASK));
    tap.fromClient(frame(0, Buffer.from('\x00rm -rf /tmp/x\n'), true, MASK));
    tap.fromClient(frame(0, Buffer.from('\x00more\n'), true, MASK)); // a continuation with no message
    tap.close();
    await rec.whenFinished();
    expect(eventsOf(upload, 'i')).toBe('rm -rf /tmp/x\nmore\n');
    expect(eventsOf(upload, 'r')).toBe('100x30');
  });

  it('base64: the channel digit of every frame, whatever its opcode; the payload decoded per frame', async () => {
    const { rec, upload } = recording(false, 'full', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.base64.channel.k8s.io', recordStdin: true });
    tap.fromClient(frame(2, Buffer.from('0' + Buffer.from('ab').toString('base64')), false, MASK));
    tap.fromClient(frame(0, Buffer.from('0' + Buffer.from('cd').toString('base64')), true, MASK));
    tap.close();
    await rec.whenFinished();
    expect(eventsOf(upload, 'i')).toBe('abcd');
  });

  it('a 64-bit length with its top bit set is negative to x/net: an empty frame, the next frame follows at once', async () => {
    const { rec, upload } = recording(false, 'full', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: true });
    tap.fromClient(Buffer.from([0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, ...MASK]));
    tap.fromClient(frame(2, Buffer.from('\x00next\n'), true, MASK));
    tap.close();
    const s = await rec.whenFinished();
    expect(tap.failure).toBeUndefined();
    expect(eventsOf(upload, 'i')).toBe('next\n');
    expect(s.result).toBe('complete');
  });

  it.each([
    ['a close frame', frame(8, Buffer.from([3, 0xe8]), true, MASK)],
    ['a pong (x/net: not implemented, the read loop ends)', frame(10, Buffer.alloc(0), true, MASK)],
    ['an unmasked frame', frame(2, Buffer.from('\x00x'), true)],
    ['a frame over 32 MiB', Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0x02, 0, 0, 1, ...MASK])],
  ])('x/net stops reading at %s: nothing after it is stdin', async (_what, stop) => {
    const { rec, upload } = recording(false, 'full', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: true });
    tap.fromClient(frame(9, Buffer.alloc(200, 'p'), false, MASK)); // a long, unfinished ping: skipped
    tap.fromClient(frame(2, Buffer.from('\x00before\n'), true, MASK));
    tap.fromClient(stop);
    tap.fromClient(frame(2, Buffer.from('\x00after\n'), true, MASK));
    tap.close();
    const s = await rec.whenFinished();
    expect(eventsOf(upload, 'i')).toBe('before\n');
    expect(s.result).toBe('complete');
  });
});

describe('WebSocketTap reads server frames as a client does (RFC 6455, as ws and gorilla/websocket)', () => {
  it.each([
    ['a reserved opcode', rawFrame(0x83, Buffer.from('\x01x'))],
    ['RSV1 without an extension', rawFrame(0xc2, Buffer.from('\x01x'))],
    ['a masked server frame', frame(2, Buffer.from('\x01x'), true, MASK)],
    ['a text message that is not UTF-8', frame(1, Buffer.from([1, 0xff, 0xfe]))],
    ['a close frame with a 1-byte payload', frame(8, Buffer.from([3]))],
    ['a close frame with an invalid code', frame(8, Buffer.from([0x03, 0xed]))],
  ])('enforce, %s: fatal aborts with the Status, result terminated, the cast says why, metric', async (_what, bad) => {
    const { rec, upload, registry } = recording(false, 'output', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: false });
    tap.fromUpstream(frame(2, Buffer.from('\x01before\n')));
    tap.fromUpstream(bad);
    tap.fromUpstream(frame(2, Buffer.from('\x01after\n')));
    expect(rec.fatal.aborted).toBe(true);
    const reason = rec.fatal.reason as RecordingUnavailableError;
    expect(reason.toStatus()).toMatchObject({ code: 503, message: 'session recording unavailable' });
    // The upstream cannot be read past the bad frame: the Status goes out at once.
    expect(tap.terminate(reason.toStatus()).cut(Buffer.alloc(0)).done).toBe(true);
    tap.close();
    const s = await rec.whenFinished();
    expect(s.result).toBe('terminated');
    expect(eventsOf(upload, 'o')).toBe('before\r\n');
    expect(upload.parsed().events.map((e) => e[2])).toContainEqual(expect.stringMatching(/^recording stopped: the session's websocket stream could not be read/));
    expect(counterValue(await registry.metrics(), 'kube_stream_proxy_session_recording_unreadable_streams_total', { protocol: 'websocket' })).toBe(1);
  });

  it('fail open: the marker, result incomplete, metric; the session goes on', async () => {
    const { rec, upload, registry } = recording(false, 'output', false);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: false });
    tap.fromUpstream(frame(2, Buffer.from('\x01before\n')));
    tap.fromUpstream(rawFrame(0x8b, Buffer.from('\x01x')));
    expect(rec.fatal.aborted).toBe(false);
    tap.close();
    const s = await rec.whenFinished();
    expect(s.result).toBe('incomplete');
    expect(upload.parsed().events.map((e) => e[2])).toContainEqual(expect.stringMatching(/^recording stopped: the session's websocket stream could not be read/));
    expect(counterValue(await registry.metrics(), 'kube_stream_proxy_session_recording_unreadable_streams_total', { protocol: 'websocket' })).toBe(1);
  });

  it('after the server close frame the client reads nothing more: not recorded', async () => {
    const { rec, upload } = recording(false, 'output', true);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: false });
    tap.fromUpstream(frame(2, Buffer.from('\x01before\n')));
    tap.fromUpstream(frame(8, Buffer.from([0x03, 0xe8])));
    tap.fromUpstream(frame(2, Buffer.from('\x01after\n')));
    tap.close();
    const s = await rec.whenFinished();
    expect(eventsOf(upload, 'o')).toBe('before\r\n');
    expect(s.result).toBe('complete');
  });
});

describe('WebSocketTap (unit)', () => {
  it('v4 base64: channel digits, base64 split across frames, stdin only with full, resize, the Status', async () => {
    const { rec, upload } = recording(true, 'full');
    const tap = new WebSocketTap(rec, { protocol: 'v4.base64.channel.k8s.io', recordStdin: true });
    const mask = Buffer.from([1, 2, 3, 4]);
    tap.fromClient(frame(1, Buffer.from('4' + Buffer.from('{"Width":90,"Height":20}').toString('base64')), true, mask));
    tap.fromClient(frame(1, Buffer.from('0' + Buffer.from('ls\r').toString('base64')), true, mask));
    const out = Buffer.from('héllo\r\n').toString('base64'); // 12 characters: split 5 + 7
    tap.fromUpstream(frame(1, Buffer.from('1' + out.slice(0, 5)), false));
    tap.fromUpstream(frame(0, Buffer.from(out.slice(5)), true));
    const status = JSON.stringify({ metadata: {}, status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '7' }] } });
    tap.fromUpstream(frame(1, Buffer.from('3' + Buffer.from(status).toString('base64'))));
    tap.close();
    const s = await rec.whenFinished();
    expect(s.exitCode).toBe(7);
    const { header, events } = upload.parsed();
    expect([header.width, header.height]).toEqual([90, 20]);
    // The frames' pieces are separate events; the UTF-8 character split between them stays whole.
    expect(events.map((e) => [e[1], e[2]])).toEqual([
      ['i', 'ls\r'],
      ['o', 'hé'],
      ['o', 'llo\r\n'],
      ['m', 'exit 7'],
    ]);
  });

  it('terminate: relays the rest of the frame in progress, then the Status on channel 3 and close 1000', () => {
    const { rec } = recording(false);
    const tap = new WebSocketTap(rec, { protocol: 'v4.channel.k8s.io', recordStdin: false });
    const f = frame(2, Buffer.concat([Buffer.from([1]), Buffer.alloc(200, 'z')]));
    tap.fromUpstream(f.subarray(0, 50));
    const plan = tap.terminate(errorStatus(503, 'session recording unavailable', 'ServiceUnavailable'));
    expect(plan.cut(Buffer.alloc(0))).toEqual({ forward: Buffer.alloc(0), done: false });
    const next = Buffer.concat([f.subarray(50), frame(2, Buffer.from([1, 0x41]))]);
    const { forward, done } = plan.cut(next);
    expect(done).toBe(true);
    expect(forward.equals(f.subarray(50))).toBe(true);
    const msgs = collect(plan.bytes, plan.bytes.length, 'rfc6455-client').messages;
    expect(msgs).toHaveLength(1);
    expect(msgs[0]![1].charCodeAt(0)).toBe(3);
    expect(JSON.parse(msgs[0]![1].slice(1))).toMatchObject({ status: 'Failure', code: 503, message: 'session recording unavailable' });
  });
});

describe('WebSocketTap on the dev cluster (real server frames, ws client frames)', () => {
  let work: string;
  let cluster: DevCluster;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-ws-'));
    cluster = await startDevCluster({ dataDir: join(work, 'pods') });
  });
  afterAll(async () => {
    await cluster?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it.each(['v4.channel.k8s.io', 'v4.base64.channel.k8s.io', 'channel.k8s.io', 'base64.channel.k8s.io'])('%s: stdout, stderr, exit', async (protocol) => {
    const made: Array<{ rec: SessionRecording; upload: MemoryUpload }> = [];
    const relay = await startRecordingRelay({ host: '127.0.0.1', port: Number(new URL(cluster.url).port) }, (_req, res) => {
      const r = recording(false);
      made.push(r);
      return new WebSocketTap(r.rec, { protocol: headValue(res, 'Sec-WebSocket-Protocol') ?? '', recordStdin: false });
    });
    try {
      const cmd = ['sh', '-c', 'echo out; echo err >&2; exit 5'].map((c) => `command=${encodeURIComponent(c)}`).join('&');
      const ws = new WebSocket(`${relay.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/demo/exec?${cmd}&stdout=true&stderr=true`, [protocol]);
      await new Promise<void>((resolve, reject) => {
        ws.on('close', () => resolve());
        ws.on('error', reject);
      });
      await relay.connections[0]!.closed;
      const s = await made[0]!.rec.whenFinished();
      const events = made[0]!.upload.parsed().events.map((e) => [e[1], e[2]]);
      expect(events).toContainEqual(['o', 'out\r\n']);
      expect(events).toContainEqual(['o', `${STDERR_START}err\r\n${STDERR_END}`]);
      if (protocol.startsWith('v4.')) {
        expect(s.exitCode).toBe(5);
        expect(events.at(-1)).toEqual(['m', 'exit 5']);
      } else {
        // v1: the error channel carries text, no exit code.
        expect(s.exitCode).toBeNull();
        expect(events.at(-1)![1]).toMatch(/^error: /);
      }
    } finally {
      await relay.close();
    }
  });
});
