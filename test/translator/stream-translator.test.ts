/**
 * The translator's wire behaviour, driven with a raw `ws` client through the proxy to the dev
 * cluster (which has no v5): initial frame, CLOSE handling, resize never blocking stdin, every
 * outcome of an upgraded session as one Status on channel 3 then close 1000, an upstream refusal as
 * the handshake's answer, the counter codes, and what stays passthrough.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { isCompleteAnswer, parseAnswer, RawClient, spdyUpgradeRequest } from '../proxy/scripted-upstream.js';
import { startTranslatorFixture, type TranslatorFixture } from './translator-fixture.js';

let fx: TranslatorFixture;
beforeAll(async () => {
  fx = await startTranslatorFixture();
});
afterAll(async () => {
  await fx?.close();
});

const V5 = 'v5.channel.k8s.io';

interface Session {
  ws: WebSocket;
  messages: Buffer[];
  opened: Promise<void>;
  closed: Promise<number>;
  response: Promise<{ code: number; body: string }>;
  /** Everything received on `channel`, concatenated. */
  channel(n: number): Buffer;
}

function open(query: string, protocols: string | string[] = V5, pod = 'demo', sub = 'exec'): Session {
  const ws = new WebSocket(`${fx.proxy.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/${pod}/${sub}?${query}`, protocols);
  const messages: Buffer[] = [];
  ws.on('message', (d: Buffer) => messages.push(d));
  ws.on('error', () => {});
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', () => reject(new Error('unexpected response')));
  });
  opened.catch(() => {});
  return {
    ws,
    messages,
    opened,
    closed: new Promise((resolve) => ws.once('close', (code: number) => resolve(code))),
    response: new Promise((resolve) => {
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
      });
    }),
    channel: (n) => Buffer.concat(messages.filter((m) => m[0] === n).map((m) => m.subarray(1))),
  };
}

const cmd = (...argv: string[]): string => argv.map((a) => `command=${encodeURIComponent(a)}`).join('&');
const status = (s: Session): unknown => JSON.parse(s.channel(3).toString());

describe('StreamTranslatorProxy on the wire', () => {
  it.each([
    ['stdout requested', 'stdout=true&stderr=true', 1],
    ['only stderr', 'stderr=true', 2],
    ['only stdin', 'stdin=true', 3],
  ])('sends one initial empty frame (%s) on channel %i', async (_name, streams, channel) => {
    const s = open(`${streams}&${cmd('true')}`);
    await s.opened;
    expect(s.ws.protocol).toBe(V5);
    if (streams === 'stdin=true') s.ws.send(Buffer.from([255, 0]));
    expect(await s.closed).toBe(1000);
    expect([...s.messages[0]!]).toEqual([channel]);
    expect(s.messages.filter((m) => m.length === 1)).toHaveLength(1);
    expect(status(s)).toEqual({ metadata: {}, status: 'Success' });
  });

  it('exit code: the upstream NonZeroExitCode Status, counted as 200', async () => {
    const before = await fx.translatedByCode();
    const s = open(`stdout=true&${cmd('sh', '-c', 'echo x; exit 3')}`);
    expect(await s.closed).toBe(1000);
    expect(s.channel(1).toString()).toBe('x\n');
    expect(status(s)).toMatchObject({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } });
    expect((await fx.translatedByCode())['200']).toBe((before['200'] ?? 0) + 1);
  });

  it('CLOSE [255,0] ends stdin (FIN upstream); a repeated CLOSE is a no-op', async () => {
    const s = open(`stdin=true&stdout=true&${cmd('cat')}`);
    await s.opened;
    s.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('hello\n')]));
    s.ws.send(Buffer.from([255, 0]));
    s.ws.send(Buffer.from([255, 0]));
    expect(await s.closed).toBe(1000);
    expect(s.channel(1).toString()).toBe('hello\n');
    expect(status(s)).toEqual({ metadata: {}, status: 'Success' });
  });

  it.each([
    ['no channel byte', [255]],
    ['extra bytes', [255, 0, 0]],
    ['bad channel', [255, 9]],
  ])('a malformed CLOSE (%s) drops the connection and counts 500', async (_name, bytes) => {
    const before = await fx.translatedByCode();
    const s = open(`stdin=true&stdout=true&${cmd('cat')}`);
    await s.opened;
    s.ws.send(Buffer.from(bytes));
    expect(await s.closed).toBe(1006);
    expect(s.channel(3).length).toBe(0);
    expect((await fx.translatedByCode())['500']).toBe((before['500'] ?? 0) + 1);
  });

  it('resize input without tty is dropped and never blocks stdin', async () => {
    const s = open(`stdin=true&stdout=true&${cmd('cat')}`);
    await s.opened;
    for (let i = 0; i < 50; i++) s.ws.send(Buffer.concat([Buffer.from([4]), Buffer.from(`{"Width":${80 + i},"Height":24}`)]));
    s.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('after-resize\n')]));
    s.ws.send(Buffer.from([255, 0]));
    expect(await s.closed).toBe(1000);
    expect(s.channel(1).toString()).toBe('after-resize\n');
  });

  it('a resize with tty reaches the pty (JS-style lowercase keys)', async () => {
    const s = open(`stdin=true&stdout=true&tty=true&${cmd('sh', '-c', 'read x; stty size')}`);
    await s.opened;
    s.ws.send(Buffer.concat([Buffer.from([4]), Buffer.from('{"height":33,"width":111}')]));
    // The pty must have the size before `stty size` runs; the shell reads stdin only after `read`.
    const sized = new Promise<void>((resolve) => s.ws.on('message', () => s.channel(1).length > 0 && resolve()));
    s.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('go\n')]));
    await sized;
    expect(await s.closed).toBe(1000);
    expect(s.channel(1).toString()).toMatch(/33 111\r?\n$/);
  });

  it('upstream refusal (pod missing upstream): the upstream\'s answer to the handshake, verbatim, no 101, counted with its code', async () => {
    const before = await fx.translatedByCode();
    const s = open(`stdout=true&${cmd('true')}`, V5, 'no-such-pod');
    const r = await s.response;
    // What the upstream itself answers the same request with over SPDY.
    const direct = await RawClient.connect(fx.cluster.url, { timeoutMs: 10_000 });
    direct.write(spdyUpgradeRequest(`/api/v1/namespaces/default/pods/no-such-pod/exec?stdout=true&${cmd('true')}`));
    const upstreamAnswer = parseAnswer(await direct.until(isCompleteAnswer, 'the upstream answer'));
    direct.destroy();
    expect(r.code).toBe(404);
    expect(r.body).toBe(upstreamAnswer.body.toString());
    expect(JSON.parse(r.body)).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
    expect(s.messages).toHaveLength(0);
    expect((await fx.translatedByCode())['404']).toBe((before['404'] ?? 0) + 1);
  });

  it('a bad query is a plain HTTP 400 Status before any upgrade, not counted', async () => {
    const before = await fx.translatedByCode();
    const s = open(cmd('true'));
    const r = await s.response;
    expect(r.code).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ kind: 'Status', code: 400, message: 'you must specify at least 1 of stdin, stdout, stderr' });
    expect(await fx.translatedByCode()).toEqual(before);
  });

  it('a failed WebSocket handshake is answered 400 and counted 400', async () => {
    const before = await fx.translatedByCode();
    const url = new URL(fx.proxy.url);
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(
          `GET /api/v1/namespaces/default/pods/demo/exec?stdout=true&${cmd('true')} HTTP/1.1\r\nHost: x\r\n` +
            `Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ${V5}\r\n\r\n`,
        );
      });
      let text = '';
      socket.on('data', (c) => (text += c));
      socket.on('close', () => resolve(text));
      socket.on('error', () => {});
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect((await fx.translatedByCode())['400']).toBe((before['400'] ?? 0) + 1);
  });

  it('WebSocket v4 (no v5 offered) is not translated: it passes through to the upstream', async () => {
    const before = await fx.translatedByCode();
    const s = open(`stdout=true&${cmd('echo', 'v4')}`, 'v4.channel.k8s.io');
    await s.opened;
    expect(s.ws.protocol).toBe('v4.channel.k8s.io');
    await s.closed;
    expect(s.channel(1).toString()).toBe('v4\n');
    expect(await fx.translatedByCode()).toEqual(before);
  });
});
