/**
 * The SPDY tap on synthetic frames (the real-kubectl runs are in taps-kubectl.test.ts): streams
 * mapped by their streamtype header through the tap's own decompressor, events held in order while
 * a header block inflates, resize JSON, the error stream's Status at FIN, no exit without FIN, a
 * protocol error stops the tap without touching the relay, port headers for port-forward, and the
 * enforce end (the rest of the frame in progress, then Status + FINs + GOAWAY).
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.js';
import { Registry } from 'prom-client';
import { encodeFrame, FrameParser, type SpdyFrame } from '../../../src/spdy/frame.js';
import { HeaderCompressor } from '../../../src/spdy/header-block.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { SpdyTap } from '../../../src/recording/spdy-tap.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { errorStatus, nonZeroExitStatus } from '../../../src/status.js';
import { MemoryUpload } from './recording-fixture.js';

function rec(tty = true): { recording: SessionRecording; upload: MemoryUpload } {
  const upload = new MemoryUpload();
  const recording = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'], tty, record: 'full' },
    enforce: false,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  return { recording, upload };
}

const bytes = (f: SpdyFrame): Buffer => Buffer.concat(encodeFrame(f));

function clientStreams(types: string[], extra: Record<string, string> = {}): Buffer {
  const c = new HeaderCompressor();
  return Buffer.concat(
    types.map((t, i) => bytes({ type: 'syn_stream', streamId: 1 + 2 * i, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock: c.compress({ streamtype: t, ...extra }) })),
  );
}

describe('SpdyTap', () => {
  it('maps streams by streamtype; stdin, output, resize and the exit status become events, in order', async () => {
    const { recording, upload } = rec();
    const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
    // error=1 stdin=3 stdout=5 resize=7
    tap.fromClient(clientStreams(['error', 'stdin', 'stdout', 'resize']));
    // Sent before the header blocks are inflated: held, then delivered in order.
    tap.fromClient(bytes({ type: 'data', streamId: 7, fin: false, data: Buffer.from('{"Width":90,"Height":20}') }));
    tap.fromUpstream(bytes({ type: 'data', streamId: 5, fin: false, data: Buffer.from('$ ') }));
    tap.fromClient(bytes({ type: 'data', streamId: 3, fin: false, data: Buffer.from('ls\r') }));
    tap.fromUpstream(bytes({ type: 'data', streamId: 5, fin: true, data: Buffer.from('ls\r\nfile\r\n') }));
    tap.fromUpstream(bytes({ type: 'data', streamId: 1, fin: false, data: Buffer.from(JSON.stringify(nonZeroExitStatus(2)).slice(0, 10)) }));
    tap.fromUpstream(bytes({ type: 'data', streamId: 1, fin: true, data: Buffer.from(JSON.stringify(nonZeroExitStatus(2)).slice(10)) }));
    tap.close();
    const s = await recording.whenFinished();
    expect(s.exitCode).toBe(2);
    const { header, events } = upload.parsed();
    expect([header.width, header.height]).toEqual([90, 20]);
    expect(events.map((e) => [e[1], e[2]])).toEqual([
      ['o', '$ '],
      ['i', 'ls\r'],
      ['o', 'ls\r\nfile\r\n'],
      ['m', 'exit 2'],
    ]);
  });

  it('no FIN on the error stream (the upstream was lost): no exit status', async () => {
    const { recording, upload } = rec(false);
    const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
    tap.fromClient(clientStreams(['error', 'stdout']));
    tap.fromUpstream(bytes({ type: 'data', streamId: 3, fin: false, data: Buffer.from('partial') }));
    tap.close();
    expect((await recording.whenFinished()).exitCode).toBeNull();
    expect(upload.parsed().events.at(-1)![2]).toBe('ended without an exit status');
  });

  it('garbage in the relayed bytes stops the tap (failure), nothing thrown to the relay', () => {
    const { recording } = rec();
    const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
    expect(() => tap.fromUpstream(Buffer.from([0x80, 0x02, 0x00, 0x01, 0, 0, 0, 0]))).not.toThrow();
    expect(tap.failure?.message).toMatch(/unsupported SPDY version 2/);
    expect(() => tap.fromUpstream(Buffer.from('more'))).not.toThrow();
  });

  it('port-forward: every client stream header reaches onStreamHeaders (ports)', async () => {
    const ports: string[] = [];
    const tap = new SpdyTap(undefined, { protocol: '', onStreamHeaders: (h) => h.port && ports.push(h.port[0]!) });
    tap.fromClient(clientStreams(['error', 'data'], { port: '8080' }));
    await waitFor('both header blocks inflated', async () => (ports.length === 2 ? true : undefined), 10_000, 2);
    expect(ports).toEqual(['8080', '8080']);
    tap.close();
  });

  it('terminate: forwards the rest of the DATA frame in progress, then Status on the error stream, FINs, GOAWAY', async () => {
    const { recording } = rec(false);
    const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
    tap.fromClient(clientStreams(['error', 'stdout', 'stderr']));
    await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
    const big = bytes({ type: 'data', streamId: 3, fin: false, data: Buffer.alloc(1000, 'o') });
    tap.fromUpstream(big.subarray(0, 300));
    const plan = tap.terminate(errorStatus(503, 'session recording unavailable', 'ServiceUnavailable'));
    expect(plan.cut(Buffer.alloc(0)).done).toBe(false);
    const after = bytes({ type: 'data', streamId: 3, fin: false, data: Buffer.from('never relayed') });
    const { forward, done } = plan.cut(Buffer.concat([big.subarray(300), after]));
    expect(done).toBe(true);
    expect(forward.equals(big.subarray(300))).toBe(true);
    const frames = new FrameParser().push(plan.bytes);
    expect(frames.map((f) => [f.type, 'streamId' in f ? f.streamId : undefined, 'fin' in f ? f.fin : undefined])).toEqual([
      ['data', 1, true],
      ['data', 3, true],
      ['data', 5, true],
      ['goaway', undefined, undefined],
    ]);
    const status = JSON.parse((frames[0] as { data: Buffer }).data.toString());
    expect(status).toMatchObject({ code: 503, message: 'session recording unavailable', reason: 'ServiceUnavailable' });
    // At a boundary already: done at once.
    expect(tap.terminate(errorStatus(503, 'x')).cut(Buffer.alloc(0)).done).toBe(true);
    tap.close();
  });

  it('FrameParser.bytesToFrameEnd: 0 at boundaries, undefined mid-header, the rest of the frame otherwise', () => {
    const p = new FrameParser({ streamData: true });
    const f = bytes({ type: 'data', streamId: 1, fin: false, data: Buffer.alloc(10) });
    expect(p.bytesToFrameEnd).toBe(0);
    p.push(f.subarray(0, 5));
    expect(p.bytesToFrameEnd).toBeUndefined();
    p.push(f.subarray(5, 12));
    expect(p.bytesToFrameEnd).toBe(6);
    p.push(f.subarray(12));
    expect(p.bytesToFrameEnd).toBe(0);
    const ping = bytes({ type: 'ping', id: 1 });
    p.push(ping.subarray(0, 9));
    expect(p.bytesToFrameEnd).toBe(3);
  });
});
