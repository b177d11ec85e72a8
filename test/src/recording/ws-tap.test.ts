/**
 * The WebSocket tap: the frame reader (masking without modifying the input, fragmentation with a
 * control frame between fragments, splits at every byte), and the tap on real dev-cluster sessions
 * for every legacy subprotocol (binary and base64, v1 and v4) through the recording relay.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import WebSocket from 'ws';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { unmaskedCopy, WsFrameReader } from '../../../src/recording/ws-frame-reader.js';
import { WebSocketTap } from '../../../src/recording/ws-tap.js';
import { STDERR_END, STDERR_START } from '../../../src/recording/asciicast.js';
import { errorStatus } from '../../../src/status.js';
import { headValue, MemoryUpload, startRecordingRelay } from './recording-fixture.js';

/** One client (masked) or server frame. */
function frame(opcode: number, payload: Buffer, fin = true, mask?: Buffer): Buffer {
  const n = payload.length;
  const len = n < 126 ? Buffer.from([n | (mask ? 0x80 : 0)]) : Buffer.from([126 | (mask ? 0x80 : 0), n >> 8, n & 0xff]);
  const body = mask ? Buffer.from(payload.map((b, i) => b ^ mask[i & 3]!)) : payload;
  return Buffer.concat([Buffer.from([(fin ? 0x80 : 0) | opcode]), len, ...(mask ? [mask] : []), body]);
}

function collect(stream: Buffer, chunkSize: number): { messages: Array<[number, string]>; closes: number } {
  const messages: Array<[number, string]> = [];
  let current: Buffer[] = [];
  let closes = 0;
  const reader = new WsFrameReader({
    data(op, piece, mask, offset, first, fin) {
      if (first) current = [];
      current.push(unmaskedCopy(piece, mask, offset));
      if (fin) messages.push([op, Buffer.concat(current).toString()]);
    },
    close: () => closes++,
  });
  for (let i = 0; i < stream.length; i += chunkSize) reader.push(stream.subarray(i, i + chunkSize));
  expect(reader.bytesToFrameEnd).toBe(0);
  return { messages, closes };
}

describe('WsFrameReader', () => {
  const mask = Buffer.from([0x11, 0x22, 0x33, 0x44]);
  const big = Buffer.alloc(300, 'y');
  const stream = Buffer.concat([
    frame(2, Buffer.from('\x00hello'), true, mask),
    frame(1, Buffer.from('frag-'), false, mask),
    frame(9, Buffer.from('ping'), true, mask), // a control frame between fragments
    frame(0, Buffer.from('ment'), true, mask),
    frame(2, Buffer.alloc(0), true),
    frame(2, big, true, mask),
    frame(8, Buffer.from([0x03, 0xe8]), true),
  ]);

  it.each([1, 2, 3, 5, 64, stream.length])('split every %i bytes: the same messages, the input unchanged', (size) => {
    const before = Buffer.from(stream);
    const { messages, closes } = collect(stream, size);
    expect(messages).toEqual([
      [2, '\x00hello'],
      [1, 'frag-ment'],
      [2, ''],
      [2, big.toString()],
    ]);
    expect(closes).toBe(1);
    expect(stream.equals(before)).toBe(true);
  });

  it('bytesToFrameEnd: undefined mid-header, the payload left, 0 at a boundary', () => {
    const reader = new WsFrameReader({ data: () => undefined, close: () => undefined });
    const f = frame(2, Buffer.from('abcdef'));
    reader.push(f.subarray(0, 1));
    expect(reader.bytesToFrameEnd).toBeUndefined();
    reader.push(f.subarray(1, 4));
    expect(reader.bytesToFrameEnd).toBe(4);
    reader.push(f.subarray(4));
    expect(reader.bytesToFrameEnd).toBe(0);
  });

  it('a reserved opcode is an error (and stays one)', () => {
    const reader = new WsFrameReader({ data: () => undefined, close: () => undefined });
    expect(() => reader.push(Buffer.from([0x83, 0x00]))).toThrow(/reserved opcode 3/);
    expect(() => reader.push(Buffer.from([0x82, 0x00]))).toThrow(/reserved opcode 3/);
  });
});

function recording(tty: boolean, record: 'output' | 'full' = 'output'): { rec: SessionRecording; upload: MemoryUpload } {
  const upload = new MemoryUpload();
  const rec = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'default', pod: 'demo', subresource: 'exec', command: ['sh'], tty, record },
    enforce: false,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  return { rec, upload };
}

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
    const msgs = collect(plan.bytes, plan.bytes.length).messages;
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
