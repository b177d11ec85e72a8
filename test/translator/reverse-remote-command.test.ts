/**
 * The ReverseStreamTranslatorProxy on the wire, driven directly: the client's SPDY bytes and the
 * upstream's WebSocket bytes are written by the test (real codecs, translator/reverse-wire.ts) over
 * in-memory connections, so each test decides exactly how the bytes are cut into reads. Covered: the
 * handshakes (what goes upstream, and when), every refusal, the frame mapping both ways with the
 * bytes split at every boundary, v4 and v1–v3 on either side, the session's ends (client gone, stop,
 * idle, upstream lost), ping, the bandwidth limit and the recording.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Duplex } from 'node:stream';
import { Registry } from 'prom-client';
import { ShuttingDownError } from '../../src/errors.js';
import { createRecordingMetrics } from '../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../src/recording/session-recording.js';
import { newRecordingId } from '../../src/recording/sink.js';
import { encodeStatus, nonZeroExitStatus, successStatus } from '../../src/status.js';
import { parseRemoteCommandOptions } from '../../src/wire/remote-command-options.js';
import { ReverseStreamTranslatorProxy } from '../../translator/reverse-remote-command.js';
import type { StreamTranslatorOptions, TranslatorHandle, TranslatorResult } from '../../translator/stream-translator.js';
import { MemoryUpload } from '../src/recording/recording-fixture.js';
import { CodeCounter, TestLog } from './reverse-fixture.js';
import {
  channelFrame,
  ClientFrames,
  closeFrame,
  headValue,
  MemoryRoute,
  parsedRequest,
  playUpstream,
  responseOf,
  SpdyClientFrames,
  SpdyServerFrames,
  socketPair,
  spdyExecHead,
  switching,
  until,
  type Dialled,
} from './reverse-wire.js';

const V5 = 'v5.channel.k8s.io';
const V4 = 'v4.channel.k8s.io';

/** One translate() call with both of its connections in the test's hands. */
interface Run {
  route: MemoryRoute;
  counter: CodeCounter;
  log: TestLog;
  handle: Promise<TranslatorHandle>;
  /** The test's end of the client connection. */
  client: Duplex;
  /** Everything the proxy wrote to the client. */
  received(): Buffer;
  clientClosed(): boolean;
}

const runs: Run[] = [];
afterEach(() => {
  for (const r of runs.splice(0)) r.client.destroy();
});

async function open(o: {
  query: string;
  protocols?: string[];
  early?: Buffer;
  proxy?: Partial<StreamTranslatorOptions>;
  recording?: SessionRecording;
  extraHead?: string;
}): Promise<Run> {
  const route = new MemoryRoute();
  const counter = new CodeCounter();
  const log = new TestLog();
  const proxy = new ReverseStreamTranslatorProxy({ upstream: route, metrics: counter, maxBytesPerSec: 0, responseTimeoutMs: 5_000, ...o.proxy });
  const req = await parsedRequest(spdyExecHead(o.query, o.protocols, o.extraHead));
  const [socket, client] = socketPair();
  const chunks: Buffer[] = [];
  let closed = false;
  client.on('data', (c: Buffer) => chunks.push(c));
  client.on('close', () => (closed = true));
  client.on('error', () => {});
  const parsed = parseRemoteCommandOptions(new URL(req.url ?? '/', 'http://x').searchParams);
  if (!parsed.ok) throw new Error('bad query in test');
  const handle = proxy.translate({
    req,
    socket,
    head: o.early ?? Buffer.alloc(0),
    options: parsed.value,
    client: { remoteAddress: '10.0.0.7', proto: 'https', host: 'proxy.example' },
    log,
    ...(o.recording ? { recording: o.recording } : {}),
  });
  const run: Run = { route, counter, log, handle, client, received: () => Buffer.concat(chunks), clientClosed: () => closed };
  runs.push(run);
  return run;
}

/** Answer the upstream's handshake with a 101 choosing `protocol`; its end and what the proxy sends after the head. */
async function accept(run: Run, protocol = V5): Promise<{ up: Dialled; frames: ClientFrames; head: string }> {
  const up = await run.route.next();
  const { head } = await up.head;
  const frames = playUpstream(up, head);
  up.socket.write(switching(head, protocol));
  return { up, frames, head };
}

/** The client's view after its 101: the proxy's SPDY frames. */
function clientView(run: Run): SpdyServerFrames {
  const frames = new SpdyServerFrames();
  const response = responseOf(run.received());
  if (response) frames.push(response.rest);
  return frames;
}

/** Wait until the proxy has sent GOAWAY, then close the client's side; the session's result. */
async function finish(run: Run, handle: TranslatorHandle): Promise<{ result: TranslatorResult; view: SpdyServerFrames }> {
  expect(handle.kind).toBe('upgraded');
  if (handle.kind !== 'upgraded') throw new Error('not upgraded');
  await until('GOAWAY to the client', () => clientView(run).goaway);
  // The proxy keeps the connection open until the client closes it (no truncation by the client's SPDY stack).
  expect(run.clientClosed()).toBe(false);
  run.client.end();
  const result = await handle.done;
  return { result, view: clientView(run) };
}

/** True once `buf` holds a whole answer with a Content-Length body. */
function answerComplete(buf: Buffer): boolean {
  const r = responseOf(buf);
  return r !== undefined && r.rest.length >= Number(/^content-length: *(\d+)/im.exec(r.head)?.[1] ?? 0);
}

/** A recording of `cat` into memory. */
function recordingOf(record: 'output' | 'full', enforce: boolean): { rec: SessionRecording; upload: MemoryUpload } {
  const upload = new MemoryUpload();
  const rec = new SessionRecording({
    identity: { sessionId: newRecordingId(), namespace: 'default', pod: 'demo', subresource: 'exec', command: ['cat'], tty: false, record },
    enforce,
    upload,
    sink: 'directory',
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  return { rec, upload };
}

const STDOUT_STDERR = 'command=x&stdout=true&stderr=true';
const EXIT_7 = encodeStatus(nonZeroExitStatus(7));

describe('handshakes', () => {
  it('the upstream gets one WebSocket upgrade head, written by the serializer, and nothing of the client until its 101', async () => {
    const spdy = new SpdyClientFrames();
    const early = spdy.syn(1, { streamtype: 'error' });
    const run = await open({ query: `${STDOUT_STDERR}&stdin=true`, early, extraHead: 'Impersonate-User: jane\r\nX-Forwarded-For: 192.0.2.1\r\n' });
    const up = await run.route.next();
    const { head, rest } = await up.head;
    expect(head.split('\r\n')[0]).toBe('GET /api/v1/namespaces/default/pods/demo/exec?command=x&stdout=true&stderr=true&stdin=true HTTP/1.1');
    expect(head.split('\r\n').slice(1, 7)).toEqual([
      'Host: upstream.test',
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      expect.stringMatching(/^Sec-WebSocket-Key: [A-Za-z0-9+/]{22}==$/),
      'Sec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io',
    ]);
    // The caller's own lines go on (passthrough); the SPDY handshake's do not; X-Forwarded-* as everywhere.
    expect(headValue(head, 'authorization')).toBe('Bearer caller-token');
    expect(headValue(head, 'impersonate-user')).toBe('jane');
    expect(headValue(head, 'x-forwarded-for')).toBe('192.0.2.1, 10.0.0.7');
    expect(headValue(head, 'x-forwarded-proto')).toBe('https');
    expect(headValue(head, 'x-stream-protocol-version')).toBeUndefined();
    expect(headValue(head, 'content-length')).toBeUndefined();
    expect(head.match(/^upgrade:/gim)).toHaveLength(1);
    expect(rest.length).toBe(0);
    // Nothing to the client before the upstream's answer.
    expect(run.received().length).toBe(0);
    const { frames } = { frames: new ClientFrames() };
    up.socket.write(switching(head, V5));
    const handle = await run.handle;
    expect(handle.kind).toBe('upgraded');
    expect(responseOf(run.received())?.head).toBe('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n');
    // The held SPDY bytes were read by the proxy's SPDY server (a SYN_REPLY), never relayed upstream raw.
    await until('the SYN_REPLY of the early stream', () => clientView(run).replies.includes(1));
    frames.push(up.received().subarray(Buffer.byteLength(head, 'latin1')));
    expect(frames.error).toBeUndefined();
    expect(up.received().indexOf(early)).toBe(-1);
    expect(run.log.text()).not.toContain('caller-token');
    run.client.destroy();
    if (handle.kind === 'upgraded') expect((await handle.done).clientEnd).toBe('client_gone');
  });

  it.each([
    ['no version line', [], 400, /X-Stream-Protocol-Version is required/],
    ['no common version', ['v9.channel.k8s.io'], 403, /unable to negotiate protocol: client supports \[v9\.channel\.k8s\.io\], server accepts \[v4\.channel\.k8s\.io v3\.channel\.k8s\.io v2\.channel\.k8s\.io channel\.k8s\.io\]/],
  ])('a client with %s is refused before any dial', async (_name, protocols, code, message) => {
    const run = await open({ query: STDOUT_STDERR, protocols });
    const handle = await run.handle;
    expect(handle).toMatchObject({ kind: 'handshake-failed', statusCode: code });
    await until('the answer', () => answerComplete(run.received()));
    const answer = responseOf(run.received())!;
    expect(answer.status).toBe(code);
    expect(JSON.parse(answer.rest.toString())).toMatchObject({ kind: 'Status', code, message: expect.stringMatching(message) });
    if (code === 403) expect(answer.head.match(/^X-Accepted-Stream-Protocol-Versions: .*$/gm)).toEqual(['X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io', 'X-Accepted-Stream-Protocol-Versions: v3.channel.k8s.io', 'X-Accepted-Stream-Protocol-Versions: v2.channel.k8s.io', 'X-Accepted-Stream-Protocol-Versions: channel.k8s.io']);
    expect(run.route.dials).toHaveLength(0);
    expect(run.counter.codes).toEqual([code]);
  });

  it('kubectl ≥ 1.29 offers v5 first over SPDY: the client gets v4, as a kubelet answers', async () => {
    const run = await open({ query: STDOUT_STDERR, protocols: [V5, V4, 'v3.channel.k8s.io'] });
    await accept(run);
    await run.handle;
    expect(responseOf(run.received())?.head).toContain('X-Stream-Protocol-Version: v4.channel.k8s.io\r\n');
  });

  it('an upstream refusal (≥ 400) is relayed to the SPDY client byte for byte; nothing upgraded', async () => {
    const run = await open({ query: STDOUT_STDERR });
    const up = await run.route.next();
    await up.head;
    const body = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"websockets refused here","reason":"Forbidden","code":403}';
    const answer = `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nX-Gateway: yes\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    up.socket.write(answer.slice(0, 20));
    up.socket.write(answer.slice(20));
    expect(await run.handle).toEqual({ kind: 'refused', statusCode: 403 });
    await until('the relayed answer', () => run.received().length === answer.length);
    expect(run.received().toString('latin1')).toBe(answer);
    expect(run.counter.codes).toEqual([403]);
  });

  it.each([
    ['a wrong Sec-WebSocket-Accept', (head: string) => switching(head, V5, 'AAAAAAAAAAAAAAAAAAAAAAAAAAA='), /Sec-WebSocket-Accept/],
    ['a subprotocol it was not offered', (head: string) => switching(head, 'v4.base64.channel.k8s.io'), /websocket with subprotocol v4\.base64\.channel\.k8s\.io/],
    ['no subprotocol', (head: string) => Buffer.from(switching(head, V5).toString('latin1').replace(/Sec-WebSocket-Protocol: .*\r\n/, ''), 'latin1'), /websocket without a subprotocol/],
    ['an extension it did not offer', (head: string) => Buffer.from(switching(head, V5).toString('latin1').replace('\r\n\r\n', '\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n'), 'latin1'), /extensions/],
    ['a redirect', () => Buffer.from('HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n'), /invalid upgrade response: status code 302/],
  ])('an upstream 101 with %s is refused: a 500 Status answers the client, no 101', async (_name, answer, message) => {
    const run = await open({ query: STDOUT_STDERR });
    const up = await run.route.next();
    const { head } = await up.head;
    up.socket.write(answer(head));
    const handle = await run.handle;
    expect(handle).toMatchObject({ kind: 'handshake-failed', statusCode: 500 });
    await until('the answer', () => answerComplete(run.received()));
    const response = responseOf(run.received())!;
    expect(response.status).toBe(500);
    expect(JSON.parse(response.rest.toString())).toMatchObject({ kind: 'Status', code: 500, message: expect.stringMatching(message) });
    expect(run.counter.codes).toEqual([500]);
  });

  it('an upstream that never answers: 504 Status to the client at the response timeout', async () => {
    const run = await open({ query: STDOUT_STDERR, proxy: { responseTimeoutMs: 100 } });
    await (await run.route.next()).head;
    expect(await run.handle).toMatchObject({ kind: 'handshake-failed', statusCode: 504 });
    await until('the answer', () => answerComplete(run.received()));
    expect(responseOf(run.received())?.status).toBe(504);
  });
});

describe.each([
  ['the fast receiver (no join copy)', undefined],
  ["ws's own Receiver (KSP_WS_FAST_RECEIVE=0)", '0'],
])('the frame mapping, upstream → client, split at every boundary, read by %s', (_name, fastReceive) => {
  beforeEach(() => {
    if (fastReceive === undefined) delete process.env.KSP_WS_FAST_RECEIVE;
    else process.env.KSP_WS_FAST_RECEIVE = fastReceive;
  });
  afterEach(() => {
    delete process.env.KSP_WS_FAST_RECEIVE;
  });

  const upstreamFrames = Buffer.concat([
    channelFrame(1), // the initial empty frame
    channelFrame(1, 'hello '),
    channelFrame(2, 'oops'),
    channelFrame(9, 'an unknown channel is dropped'),
    channelFrame(1, 'world'),
    channelFrame(3, EXIT_7),
    closeFrame(1000),
  ]);

  it('every cut of the 101 and the frames: stdout, stderr, the Status verbatim on the error stream, FINs, GOAWAY', { timeout: 60_000 }, async () => {
    const first = await open({ query: STDOUT_STDERR });
    const probe = await first.route.next();
    const total = switching((await probe.head).head, V5).length + upstreamFrames.length;
    first.client.destroy();
    for (let cut = 1; cut < total; cut++) {
      const run = await open({ query: STDOUT_STDERR });
      const up = await run.route.next();
      const { head } = await up.head;
      playUpstream(up, head);
      const bytes = Buffer.concat([switching(head, V5), upstreamFrames]);
      up.socket.write(bytes.subarray(0, cut));
      up.socket.write(bytes.subarray(cut));
      const handle = await run.handle;
      const spdy = new SpdyClientFrames();
      run.client.write(Buffer.concat([spdy.syn(1, { streamtype: 'error' }), spdy.syn(3, { streamtype: 'stdout' }), spdy.syn(5, { streamtype: 'stderr' })]));
      const { result, view } = await finish(run, handle);
      expect({ cut, stdout: view.stream(3).toString(), stderr: view.stream(5).toString(), error: view.stream(1).toString(), fin: [...view.fin].sort() }).toEqual({
        cut,
        stdout: 'hello world',
        stderr: 'oops',
        error: EXIT_7.toString(),
        fin: [1, 3, 5],
      });
      expect(result).toMatchObject({ code: 200, status: { reason: 'NonZeroExitCode' }, bytes: { toClient: 15, toUpstream: 0 } });
      expect(run.counter.codes).toEqual([200]);
    }
  });
});

describe('the frame mapping, client → upstream, split at every boundary', () => {
  it('every cut of the SPDY frames: stdin as channel 0, its FIN as CLOSE [255,0], nothing else', { timeout: 60_000 }, async () => {
    const spdy = new SpdyClientFrames();
    const bytes = Buffer.concat([
      spdy.syn(1, { streamtype: 'error' }),
      spdy.syn(3, { streamtype: 'stdin' }),
      spdy.syn(5, { streamtype: 'stdout' }),
      spdy.data(3, 'abc'),
      spdy.data(3, 'defg'),
      spdy.data(3, '', true),
    ]);
    for (let cut = 1; cut < bytes.length; cut++) {
      const run = await open({ query: 'command=cat&stdin=true&stdout=true' });
      const { up, frames } = await accept(run);
      const handle = await run.handle;
      run.client.write(bytes.subarray(0, cut));
      run.client.write(bytes.subarray(cut));
      await until('CLOSE of stdin upstream', () => frames.messages.some((m) => m[0] === 255));
      up.socket.write(Buffer.concat([channelFrame(1, 'abcdefg'), channelFrame(3, encodeStatus(successStatus())), closeFrame(1000)]));
      const { result, view } = await finish(run, handle);
      const stdin = Buffer.concat(frames.messages.filter((m) => m[0] === 0).map((m) => m.subarray(1))).toString();
      expect({ cut, stdin, last: [...frames.messages.at(-1)!], others: frames.messages.filter((m) => m[0] !== 0 && m[0] !== 255).length, error: frames.error }).toEqual({
        cut,
        stdin: 'abcdefg',
        last: [255, 0],
        others: 0,
        error: undefined,
      });
      expect(view.stream(5).toString()).toBe('abcdefg');
      expect(result).toMatchObject({ code: 200, status: { status: 'Success' }, bytes: { toUpstream: 7, toClient: 7 } });
    }
  });

  it('resize (tty, v3+): each size as channel 4 JSON, as Go clients send it; stdin goes on', async () => {
    const run = await open({ query: 'command=sh&stdin=true&stdout=true&tty=true' });
    const { up, frames } = await accept(run);
    const handle = await run.handle;
    const spdy = new SpdyClientFrames();
    run.client.write(
      Buffer.concat([
        spdy.syn(1, { streamtype: 'error' }),
        spdy.syn(3, { streamtype: 'stdin' }),
        spdy.syn(5, { streamtype: 'stdout' }),
        spdy.syn(7, { streamtype: 'resize' }),
        spdy.data(7, '{"Width":100,"Hei'),
        spdy.data(7, 'ght":40}{"width":120,"height":50}'),
        spdy.data(3, 'ls\n'),
      ]),
    );
    await until('stdin and both sizes upstream', () => frames.messages.length === 3);
    // Streams are independent (the kubelet reads each in its own goroutine): order holds per channel.
    const on = (channel: number): string[] => frames.messages.filter((m) => m[0] === channel).map((m) => m.subarray(1).toString());
    expect(on(4)).toEqual(['{"Width":100,"Height":40}', '{"Width":120,"Height":50}']);
    expect(on(0)).toEqual(['ls\n']);
    up.socket.write(Buffer.concat([channelFrame(3, encodeStatus(successStatus())), closeFrame(1000)]));
    await finish(run, handle);
  });
});

describe('protocol versions', () => {
  it('an upstream that chooses v4: everything but the stdin EOF, which v4 cannot carry (no CLOSE is sent)', async () => {
    const run = await open({ query: 'command=cat&stdin=true&stdout=true' });
    const { up, frames } = await accept(run, V4);
    const handle = await run.handle;
    const spdy = new SpdyClientFrames();
    run.client.write(Buffer.concat([spdy.syn(1, { streamtype: 'error' }), spdy.syn(3, { streamtype: 'stdin' }), spdy.syn(5, { streamtype: 'stdout' }), spdy.data(3, 'in'), spdy.data(3, '', true)]));
    await until('the stdin FIN handled', () => run.log.lines.some((l) => l.msg.startsWith('stdin EOF not signalled upstream')));
    up.socket.write(Buffer.concat([channelFrame(1, 'out'), channelFrame(3, EXIT_7), closeFrame(1000)]));
    const { result, view } = await finish(run, handle);
    expect(frames.messages.map((m) => [...m])).toEqual([[0, ...Buffer.from('in')]]);
    expect(view.stream(5).toString()).toBe('out');
    expect(view.stream(1).toString()).toBe(EXIT_7.toString());
    expect(result.code).toBe(200);
  });

  it.each([
    ['v3', 'v3.channel.k8s.io', EXIT_7, nonZeroExitStatus(7).message!],
    ['v2', 'v2.channel.k8s.io', EXIT_7, nonZeroExitStatus(7).message!],
    ['v1', 'channel.k8s.io', EXIT_7, nonZeroExitStatus(7).message!],
    ['v3 success', 'v3.channel.k8s.io', encodeStatus(successStatus()), ''],
  ])('a %s client: the error stream carries text on failure and nothing on success, as the kubelet writes it', async (_name, protocol, status, text) => {
    const run = await open({ query: STDOUT_STDERR, protocols: [protocol] });
    const { up } = await accept(run);
    const handle = await run.handle;
    expect(responseOf(run.received())?.head).toContain(`X-Stream-Protocol-Version: ${protocol}\r\n`);
    const spdy = new SpdyClientFrames();
    run.client.write(Buffer.concat([spdy.syn(1, { streamtype: 'error' }), spdy.syn(3, { streamtype: 'stdout' }), spdy.syn(5, { streamtype: 'stderr' })]));
    up.socket.write(Buffer.concat([channelFrame(1, 'x'), channelFrame(3, status), closeFrame(1000)]));
    const { view } = await finish(run, handle);
    expect(view.stream(1).toString()).toBe(text);
    expect(view.fin.has(1)).toBe(true);
  });
});

describe('the end of a session', () => {
  /** An upgraded session whose client created error, stdin, stdout. */
  async function running(proxy: Partial<StreamTranslatorOptions> = {}, recording?: SessionRecording) {
    const run = await open({ query: 'command=cat&stdin=true&stdout=true', proxy, ...(recording ? { recording } : {}) });
    const { up, frames } = await accept(run);
    const handle = await run.handle;
    if (handle.kind !== 'upgraded') throw new Error('not upgraded');
    const spdy = new SpdyClientFrames();
    run.client.write(Buffer.concat([spdy.syn(1, { streamtype: 'error' }), spdy.syn(3, { streamtype: 'stdin' }), spdy.syn(5, { streamtype: 'stdout' })]));
    await until('the replies', () => clientView(run).replies.length === 3);
    return { run, up, frames, handle, spdy };
  }

  it('the client leaves: the upstream gets close 1000 (its session and command end), counted 500', async () => {
    const { run, frames, handle } = await running();
    run.client.destroy();
    const result = await handle.done;
    expect(result).toMatchObject({ code: 500, clientEnd: 'client_gone' });
    await until('the close upstream', () => frames.closeCode !== undefined);
    expect(frames.closeCode).toBe(1000);
    expect(run.counter.codes).toEqual([500]);
  });

  it('stop (shutdown): 503 Status on the error stream, FINs, GOAWAY; the upstream gets close 1000', async () => {
    const { run, frames, handle } = await running();
    handle.stop(new ShuttingDownError());
    const { result, view } = await finish(run, handle);
    expect(JSON.parse(view.stream(1).toString())).toMatchObject({ status: 'Failure', reason: 'ServiceUnavailable', code: 503 });
    expect([...view.fin].sort()).toEqual([1, 3, 5]);
    expect(result.code).toBe(503);
    await until('the close upstream', () => frames.closeCode !== undefined);
  });

  it('the upstream connection is lost before its Status: InternalError on the error stream, 500', async () => {
    const { run, up, handle } = await running();
    up.socket.write(channelFrame(1, 'partial'));
    up.socket.destroy();
    const { result, view } = await finish(run, handle);
    expect(view.stream(5).toString()).toBe('partial');
    expect(JSON.parse(view.stream(1).toString())).toMatchObject({ reason: 'InternalError', code: 500, message: expect.stringContaining('the upstream connection was closed') });
    expect(result.code).toBe(500);
  });

  it('an upstream text message is a protocol error: InternalError, close 1003 upstream', async () => {
    const { run, up, frames, handle } = await running();
    up.socket.write(Buffer.from([0x81, 0x02, 0x68, 0x69])); // text "hi"
    const { result, view } = await finish(run, handle);
    expect(JSON.parse(view.stream(1).toString())).toMatchObject({ reason: 'InternalError', message: expect.stringContaining('text message') });
    expect(result.code).toBe(500);
    await until('the close upstream', () => frames.closeCode !== undefined);
    expect(frames.closeCode).toBe(1003);
  });

  it('a masked frame from the upstream (servers never mask) is a protocol error: InternalError, close 1002', async () => {
    const { run, up, frames, handle } = await running();
    // A binary frame on channel 1 with a mask key.
    up.socket.write(Buffer.from([0x82, 0x83, 1, 2, 3, 4, 1 ^ 1, 0x68 ^ 2, 0x69 ^ 3]));
    const { result, view } = await finish(run, handle);
    expect(view.stream(5).length).toBe(0);
    expect(JSON.parse(view.stream(1).toString())).toMatchObject({ reason: 'InternalError', code: 500 });
    expect(result.code).toBe(500);
    await until('the close upstream', () => frames.closeCode !== undefined);
    expect(frames.closeCode).toBe(1002);
  });

  it('no data either way for the idle timeout: InternalError, counted 500', async () => {
    const { run, handle } = await running({ idleTimeoutMs: 150 });
    const { result, view } = await finish(run, handle);
    expect(result).toMatchObject({ code: 500, clientEnd: 'idle_timeout' });
    expect(JSON.parse(view.stream(1).toString()).message).toContain('stream idle timeout');
  });

  it('pings the upstream every ping interval', async () => {
    const { run, frames } = await running({ pingIntervalMs: 20 });
    await until('two pings', () => frames.pings.length >= 2);
    run.client.destroy();
  });

  it('a client that never closes after the end is dropped at the finish deadline', async () => {
    const { run, up, handle } = await running({ finishDeadlineMs: 100 });
    up.socket.write(Buffer.concat([channelFrame(3, encodeStatus(successStatus())), closeFrame(1000)]));
    await until('the client dropped', () => run.clientClosed());
    expect((await handle.done).code).toBe(200);
  });

  it('the bandwidth limit holds per direction', async () => {
    const { run, up, handle } = await running({ maxBytesPerSec: 200_000 });
    const started = Date.now();
    const chunk = Buffer.alloc(50_000, 0x61);
    for (let i = 0; i < 8; i++) up.socket.write(channelFrame(1, chunk));
    await until('400 kB at the client', () => clientView(run).stream(5).length === 400_000, 10_000);
    // 400 kB at 200 kB/s, less the 0.1 s burst: at least ~1.4 s.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_300);
    up.socket.write(Buffer.concat([channelFrame(3, encodeStatus(successStatus())), closeFrame(1000)]));
    await finish(run, handle);
  });

  it('enforce holds: the recording sink fails mid-session, the session ends with 503 on the error stream and close 1000 upstream', async () => {
    const { rec, upload } = recordingOf('output', true);
    const { run, up, frames, handle } = await running({}, rec);
    up.socket.write(channelFrame(1, 'before the failure\n'));
    await until('output at the client', () => clientView(run).stream(5).length > 0);
    upload.fail(new Error('disk full'));
    const { result, view } = await finish(run, handle);
    expect(JSON.parse(view.stream(1).toString())).toMatchObject({ status: 'Failure', code: 503, message: expect.stringContaining('session recording unavailable') });
    expect(result.code).toBe(503);
    await until('the close upstream', () => frames.closeCode !== undefined);
    expect(frames.closeCode).toBe(1000);
  });

  it('recording: stdin, output, the exit and the totals, created only at the upgrade', async () => {
    const { rec, upload } = recordingOf('full', false);
    const { run, up, frames, handle, spdy } = await running({}, rec);
    expect(rec.created).toBe(true);
    run.client.write(spdy.data(3, 'typed\n'));
    await until('stdin upstream', () => frames.messages.some((m) => m[0] === 0));
    up.socket.write(Buffer.concat([channelFrame(1, 'printed\n'), channelFrame(3, EXIT_7), closeFrame(1000)]));
    await finish(run, handle);
    const summary = await rec.whenFinished();
    const events = upload.parsed().events;
    expect(events.filter((e) => e[1] === 'i').map((e) => e[2]).join('')).toBe('typed\n');
    expect(events.filter((e) => e[1] === 'o').map((e) => e[2]).join('')).toBe('printed\r\n');
    expect(summary).toMatchObject({ exitCode: 7 });
    // What the upstream got is masked on the wire, yet the recording saw it before: 'typed\n' as typed.
    expect(Buffer.concat(frames.messages.filter((m) => m[0] === 0).map((m) => m.subarray(1))).toString()).toBe('typed\n');
  });
});
