/**
 * The SPDY tap on synthetic frames (the real-kubectl runs are in taps-kubectl.test.ts): streams
 * mapped by their streamtype header through the tap's own decompressor, events held in order while
 * a header block inflates, resize JSON, the error stream's Status at FIN, no exit without FIN, a
 * protocol error stops the tap without touching the relay, port headers for port-forward, and the
 * enforce end (the rest of the frame in progress, then Status + FINs + GOAWAY). Read as the kubelet
 * reads (spdystream): repeated header names, a client SYN_REPLY's block, any version, reused ids;
 * what stays unreadable: enforce ends the session, fail open marks the recording, port-forward's
 * record says incomplete (issue 31).
 */
import { describe, expect, it } from 'vitest';
import zlib from 'node:zlib';
import { waitFor } from '../../helpers/wait.js';
import { counterValue } from '../../helpers/metrics.js';
import { Registry } from 'prom-client';
import { SPDY3_DICTIONARY } from '../../../src/spdy/dictionary.js';
import { encodeFrame, FrameParser, type SpdyFrame } from '../../../src/spdy/frame.js';
import { HeaderCompressor } from '../../../src/spdy/header-block.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { RecordingUnavailableError } from '../../../src/recording/recording-errors.js';
import { PortForwardRecording } from '../../../src/recording/port-forward-recording.js';
import { relayObserverFor } from '../../../src/recording/relay-observer.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { SpdyTap } from '../../../src/recording/spdy-tap.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { errorStatus, nonZeroExitStatus } from '../../../src/status.js';
import { MemorySink, MemoryUpload } from './recording-fixture.js';

function rec(tty = true, enforce = false): { recording: SessionRecording; upload: MemoryUpload; registry: Registry } {
  const upload = new MemoryUpload();
  const registry = new Registry();
  const recording = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'], tty, record: 'full' },
    enforce,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(registry),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  return { recording, upload, registry };
}

/**
 * A client's header compression as kubectl's (Go compress/zlib: one deflate context for the
 * connection, a sync flush after each block, so a block may back-reference earlier ones), over raw
 * name/value pairs in the order given (repeated names included).
 */
class GoHeaderCompressor {
  readonly #deflate = zlib.createDeflate({ dictionary: SPDY3_DICTIONARY });
  readonly #out: Buffer[] = [];
  constructor() {
    this.#deflate.on('data', (c: Buffer) => this.#out.push(c));
  }
  block(pairs: Array<[string, string]>): Promise<Buffer> {
    const u32 = (n: number): Buffer => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
    const raw = Buffer.concat([u32(pairs.length), ...pairs.flatMap(([n, v]) => [u32(Buffer.byteLength(n)), Buffer.from(n), u32(Buffer.byteLength(v)), Buffer.from(v)])]);
    this.#deflate.write(raw);
    return new Promise((resolve) => this.#deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve(Buffer.concat(this.#out.splice(0)))));
  }
  close(): void {
    this.#deflate.close();
  }
}

const synStream = (streamId: number, headerBlock: Buffer): Buffer =>
  bytes({ type: 'syn_stream', streamId, associatedStreamId: 0, priority: 0, fin: false, unidirectional: false, headerBlock });
const data = (streamId: number, text: string, fin = false): Buffer => bytes({ type: 'data', streamId, fin, data: Buffer.from(text) });
/** A RST_STREAM with no payload: spdystream would read the next 8 bytes as its fields (out of step); the tap cannot follow. */
const RST_STREAM_NO_PAYLOAD = Buffer.from([0x80, 0x03, 0x00, 0x03, 0, 0, 0, 0]);
const outputOf = (upload: MemoryUpload): string => upload.parsed().events.filter((e) => e[1] === 'o').map((e) => e[2]).join('');

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
    expect(() => tap.fromUpstream(RST_STREAM_NO_PAYLOAD)).not.toThrow();
    expect(tap.failure?.message).toMatch(/RST_STREAM with invalid length 0/);
    expect(() => tap.fromUpstream(Buffer.from('more'))).not.toThrow();
  });

  describe('read as the kubelet reads (moby/spdystream), so an enforced recording cannot be left behind', () => {
    it('a header block repeating a name: the first value counts (http.Header.Add, then Get), the output is recorded', async () => {
      const { recording, upload } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      const z = new GoHeaderCompressor();
      tap.fromClient(synStream(1, await z.block([['streamtype', 'error']])));
      tap.fromClient(synStream(3, await z.block([['streamtype', 'stdout'], ['streamtype', 'stdin'], ['x', 'y']])));
      z.close();
      tap.fromUpstream(data(3, 'secret output'));
      tap.fromUpstream(data(1, '', true));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      tap.close();
      const s = await recording.whenFinished();
      expect(tap.failure).toBeUndefined();
      expect(outputOf(upload)).toBe('secret output');
      expect(s.result).toBe('complete');
    });

    it("every client header block goes through the tap's one zlib context, SYN_REPLY's too (the kubelet inflates it)", async () => {
      const { recording, upload } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      const z = new GoHeaderCompressor();
      tap.fromClient(synStream(1, await z.block([['streamtype', 'error']])));
      // A SYN_REPLY from the client: spdystream inflates its block with the same context (and drops
      // the frame); the next block back-references it.
      tap.fromClient(bytes({ type: 'syn_reply', streamId: 1, fin: false, headerBlock: await z.block([['streamtype', 'stdout'], ['streamtype', 'stdout']]) }));
      tap.fromClient(synStream(3, await z.block([['streamtype', 'stdout']])));
      z.close();
      tap.fromUpstream(data(3, 'after the reply'));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      tap.close();
      const s = await recording.whenFinished();
      expect(tap.failure).toBeUndefined();
      expect(outputOf(upload)).toBe('after the reply');
      expect(s.result).toBe('complete');
    });

    it('a control frame of another SPDY version (spdystream never reads the field) is read', async () => {
      const { recording, upload } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      const h = new HeaderCompressor();
      const v2 = (f: Buffer): Buffer => (f.writeUInt16BE(0x8002, 0), f);
      tap.fromClient(v2(synStream(1, h.compress({ streamtype: 'error' }))));
      tap.fromClient(v2(synStream(3, h.compress({ streamtype: 'stdout' }))));
      tap.fromUpstream(data(3, 'out'));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      tap.close();
      const s = await recording.whenFinished();
      expect(tap.failure).toBeUndefined();
      expect(outputOf(upload)).toBe('out');
      expect(s.result).toBe('complete');
    });

    it('a SYN_STREAM reusing a stream id (spdystream refuses ids that do not grow) does not remap the stream', async () => {
      const { recording, upload } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      const h = new HeaderCompressor();
      tap.fromClient(synStream(1, h.compress({ streamtype: 'error' })));
      tap.fromClient(synStream(3, h.compress({ streamtype: 'stdout' })));
      tap.fromClient(synStream(3, h.compress({ streamtype: 'resize' })));
      tap.fromClient(synStream(1, h.compress({ streamtype: 'stdin' })));
      tap.fromUpstream(data(3, 'still stdout'));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      tap.close();
      const s = await recording.whenFinished();
      expect(outputOf(upload)).toBe('still stdout');
      expect(s.result).toBe('complete');
    });

    it('a stream it still cannot read — enforce: fatal aborts with the Status at once, the cast says why, result terminated, metric', async () => {
      const { recording, upload, registry } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      const h = new HeaderCompressor();
      tap.fromClient(synStream(1, h.compress({ streamtype: 'error' })));
      tap.fromClient(synStream(3, h.compress({ streamtype: 'stdout' })));
      tap.fromUpstream(data(3, 'before'));
      // A header block that does not inflate (the kubelet's framer fails on it too).
      tap.fromClient(synStream(5, Buffer.from('not deflate at all')));
      await waitFor('fatal', async () => (recording.fatal.aborted ? true : undefined), 10_000, 2);
      const reason = recording.fatal.reason as RecordingUnavailableError;
      expect(reason).toBeInstanceOf(RecordingUnavailableError);
      expect(reason.toStatus()).toMatchObject({ code: 503, message: 'session recording unavailable', details: { causes: [{ reason: 'SessionRecordingUnavailable', message: expect.stringMatching(/could not be read/) }] } });
      tap.close();
      const s = await recording.whenFinished();
      expect(s.result).toBe('terminated');
      expect(upload.aborted).toBe(false); // the sink is fine: what was recorded is kept
      expect(outputOf(upload)).toBe('before');
      expect(upload.parsed().events.map((e) => e[2])).toContainEqual(expect.stringMatching(/^recording stopped: the session's spdy stream could not be read/));
      const t = await registry.metrics();
      expect(counterValue(t, 'kube_stream_proxy_session_recording_unreadable_streams_total', { protocol: 'spdy' })).toBe(1);
      expect(counterValue(t, 'kube_stream_proxy_session_recording_enforce_refusals_total', { phase: 'mid_session' })).toBe(1);
    });

    it('fail open: the marker, result incomplete, metric; the session goes on', async () => {
      const { recording, upload, registry } = rec(false, false);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      tap.fromClient(clientStreams(['error', 'stdout']));
      tap.fromUpstream(data(3, 'before'));
      tap.fromUpstream(RST_STREAM_NO_PAYLOAD);
      tap.fromUpstream(data(3, 'after'));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      expect(recording.fatal.aborted).toBe(false);
      tap.close();
      const s = await recording.whenFinished();
      expect(s.result).toBe('incomplete');
      expect(outputOf(upload)).toBe('before');
      expect(upload.parsed().events.map((e) => e[2])).toContainEqual(expect.stringMatching(/^recording stopped: the session's spdy stream could not be read/));
      expect(counterValue(await registry.metrics(), 'kube_stream_proxy_session_recording_unreadable_streams_total', { protocol: 'spdy' })).toBe(1);
    });

    it('a client-side failure: the enforce end still waits for the upstream frame in progress', async () => {
      const { recording } = rec(false, true);
      const tap = new SpdyTap(recording, { protocol: 'v4.channel.k8s.io' });
      tap.fromClient(clientStreams(['error', 'stdout']));
      await waitFor('the header blocks inflated', async () => (tap.inflating ? undefined : true), 10_000, 2);
      const big = bytes({ type: 'data', streamId: 3, fin: false, data: Buffer.alloc(100, 'o') });
      tap.fromUpstream(big.subarray(0, 30));
      tap.fromClient(RST_STREAM_NO_PAYLOAD);
      expect(recording.fatal.aborted).toBe(true);
      const plan = tap.terminate((recording.fatal.reason as RecordingUnavailableError).toStatus());
      expect(plan.cut(Buffer.alloc(0)).done).toBe(false);
      const { forward, done } = plan.cut(Buffer.concat([big.subarray(30), data(3, 'not relayed')]));
      expect(done).toBe(true);
      expect(forward.equals(big.subarray(30))).toBe(true);
      tap.close();
    });
  });

  it('port-forward: every client stream header reaches onStreamHeaders (ports)', async () => {
    const ports: string[] = [];
    const tap = new SpdyTap(undefined, { protocol: '', onStreamHeaders: (h) => h.port && ports.push(h.port[0]!) });
    tap.fromClient(clientStreams(['error', 'data'], { port: '8080' }));
    await waitFor('both header blocks inflated', async () => (ports.length === 2 ? true : undefined), 10_000, 2);
    expect(ports).toEqual(['8080', '8080']);
    tap.close();
  });

  it("port-forward's record: a repeated port header counts its first value (as the kubelet's Get); headers it cannot read make it incomplete", async () => {
    const run = async (tail: Buffer | undefined): Promise<{ ports: string[] | undefined; result: string; unreadable: number }> => {
      const registry = new Registry();
      const sink = new MemorySink();
      const pf = new PortForwardRecording({ id: newRecordingId(), namespace: 'ns', pod: 'p', ports: [], enforce: false }, sink, createRecordingMetrics(registry), { warn: () => undefined });
      const observer = relayObserverFor(pf, { kind: 'spdy', subprotocol: 'portforward.k8s.io' });
      const z = new GoHeaderCompressor();
      observer.fromClient(synStream(1, await z.block([['streamtype', 'error'], ['port', '8080'], ['port', '9090']])));
      observer.fromClient(synStream(3, await z.block([['streamtype', 'data'], ['port', '8080']])));
      if (tail) observer.fromClient(tail);
      observer.fromClient(synStream(5, await z.block([['streamtype', 'data'], ['port', '7070']])));
      z.close();
      // Closed while header blocks may still be inflating: the record waits for them.
      observer.close({ toUpstream: 1, toClient: 1 });
      const s = await waitFor('the record', async () => sink.records[0], 10_000, 2);
      return { ports: s.ports, result: s.result, unreadable: counterValue(await registry.metrics(), 'kube_stream_proxy_session_recording_unreadable_streams_total', { protocol: 'spdy' }) };
    };
    expect(await run(undefined)).toEqual({ ports: ['8080', '7070'], result: 'complete', unreadable: 0 });
    expect(await run(RST_STREAM_NO_PAYLOAD)).toEqual({ ports: ['8080'], result: 'incomplete', unreadable: 1 });
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
