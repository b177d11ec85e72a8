/**
 * Malformed-input catalogue, HTTP: every case of malformed-http-cases.ts is written raw on a fresh
 * connection to the proxy; the answer is reduced to its canonical form and must equal the case's
 * `expected`. After every case: no TCP connection of the proxy, the relay or the dev cluster is left
 * open, and a real exec session (64 KiB through `cat`, byte-checked) still works.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrapeCounter } from '../helpers/metrics.js';
import { HTTP_CASES, type HttpCase, type ServeCheck } from './malformed-http-cases.js';
import {
  answerEnd,
  afterCase,
  parseHttpAnswer,
  connectRaw,
  type Raw,
  RawWs,
  startMalformedFixture,
  wsChannel,
  type HttpAnswer,
  type MalformedFixture,
} from './malformed-fixture.js';

let fx: MalformedFixture;
beforeAll(async () => {
  // The proxy's default (`--upstream-streaming auto`) in front of a dev cluster that refuses WebSocket
  // v5 and the tunnel (1.29, kubelet-like as the catalogue describes it): v5 requests fall back to the
  // proxy's translator, whose handshake checks the rows name; SPDY and legacy WebSockets pass through,
  // and a refused SPDY upgrade with no version the reverse translator serves (H07, H08, H82) is
  // answered by the upstream alone (handlers/stream-path.ts, issue 32).
  fx = await startMalformedFixture({ apiserverVersion: '1.29' });
});
afterAll(async () => {
  await fx?.close();
});

/** One answer in canonical form. */
export function describeAnswer(a: HttpAnswer): string {
  if (a.status === 101) {
    const spdyVersion = a.headers.find(([n]) => n === 'x-stream-protocol-version')?.[1];
    if (spdyVersion !== undefined) return `101 SPDY/3.1 ${spdyVersion}`;
    const p = a.headers.find(([n]) => n === 'sec-websocket-protocol')?.[1];
    return `101 ${p ?? '(no subprotocol)'}`;
  }
  if (a.json?.kind === 'Status') return `${a.status} ${a.json.reason ?? '(no reason)'} ${JSON.stringify(a.json.message ?? '')}`;
  if (a.body.length === 0) return `${a.status} (empty body)`;
  return `${a.status} text ${JSON.stringify(a.body.toString('utf8').slice(0, 120))}`;
}

const LIVEZ = 'GET /livez HTTP/1.1\r\nHost: proxy.test\r\n\r\n';

/** Run one case; returns its canonical answer. */
async function runCase(c: HttpCase): Promise<string> {
  const raw = await connectRaw(fx.proxyPort);
  try {
    for (const part of Array.isArray(c.request) ? c.request : [c.request]) raw.write(part);
    const answers: HttpAnswer[] = [];
    let offset = 0;
    for (let i = 0; i < (c.answers ?? 1); i++) {
      try {
        await raw.until((b) => answerEnd(b.subarray(offset)) >= 0, `answer ${i + 1}`);
      } catch (e) {
        if (!raw.ended) throw e;
        break;
      }
      const rest = raw.received.subarray(offset);
      answers.push(parseHttpAnswer(rest));
      offset += answerEnd(rest);
    }
    const text = answers.map(describeAnswer).join(' + ');
    if (answers.length === 0) return raw.ended ? 'closed, no answer' : 'no answer';
    if (answers[0]!.status === 101) {
      if (!c.serve) return `${text} (not checked)`;
      await serve(raw, c.serve);
      return `${text} served`;
    }
    // Did the server keep the connection? Ask again on it: an answer means open, an end means closed.
    raw.write(LIVEZ);
    try {
      await raw.until((b) => answerEnd(b.subarray(offset)) >= 0, 'the /livez answer');
      return text;
    } catch (e) {
      if (!raw.ended) throw e;
      return `${text}, closed`;
    }
  } finally {
    raw.destroy();
  }
}

/** Prove the upgraded session works (returns ` served`), or report how it ended. */
async function serve(raw: Raw, how: ServeCheck): Promise<string> {
  if (how === 'v5-status' || how === 'v5') {
    const ws = await RawWs.adopt(raw);
    // A session the upstream refused ends at once with a Status; a served one echoes.
    const data = randomBytes(1024);
    ws.send(wsChannel(0, data));
    await ws.raw.until(() => ws.channelBytes(1).length >= data.length || ws.frames().some((f) => f.opcode === 8), 'echo or close');
    if (ws.channelBytes(1).length < data.length) {
      const st = await ws.status();
      return `, then channel 3: ${st.code} ${st.reason} ${JSON.stringify(st.message)}, close ${await ws.closeCode()}`;
    }
    expect(ws.channelBytes(1).equals(data)).toBe(true);
    await ws.finishSuccess();
    return ' served';
  }
  if (how === 'v5-tty') {
    // A terminal echoes input and cat repeats it; ^D at the start of a line ends cat. Wait for cat's
    // own copy (the second one), not just the terminal's echo: input typed before cat runs can be
    // flushed when its terminal is set up, and a ^D lost that way would leave cat running.
    const ws = await RawWs.adopt(raw);
    ws.send(wsChannel(0, 'hello-tty\n'));
    await ws.raw.until(() => ws.channelBytes(1).toString().split('hello-tty').length > 2, 'tty echo and cat output');
    ws.send(wsChannel(0, '\u0004'));
    const st = await ws.status();
    expect(st.status, `channel 3: ${JSON.stringify(st)}; channel 1: ${JSON.stringify(ws.channelBytes(1).toString())}`).toBe('Success');
    expect(await ws.closeCode()).toBe(1000);
    return ' served';
  }
  if (how === 'ws-legacy') {
    const ws = await RawWs.adopt(raw);
    ws.send(wsChannel(0, 'ping-legacy'));
    await ws.raw.until(() => ws.channelBytes(1).toString().includes('ping-legacy'), 'legacy echo');
    return ' served';
  }
  throw new Error(`serve ${how} not supported here`);
}

describe('malformed HTTP input', { timeout: 30_000 }, () => {
  it('has at least 50 cases with unique ids', () => {
    expect(HTTP_CASES.length).toBeGreaterThanOrEqual(50);
    expect(new Set(HTTP_CASES.map((c) => c.id)).size).toBe(HTTP_CASES.length);
  });

  it.each(HTTP_CASES.map((c, i) => [`${c.id} ${c.title}`, c, i] as const))('%s', async (_name, c, i) => {
    const observed = await runCase(c);
    if (process.env.MALFORMED_PRINT) appendFileSync(process.env.MALFORMED_PRINT, `${c.id}\t${JSON.stringify(observed)}\n`);
    await afterCase(fx, i, HTTP_CASES.length);
    expect(observed).toBe(c.knownGap ? c.observed : c.expected);
  });

  it('took the paths the rows name: v5 fell back to the translator here, no refused SPDY upgrade was retried in WebSocket', async () => {
    // The 1.29 dev cluster refused each v5 upgrade before its 101; the translator served them.
    expect(await scrapeCounter(fx.url, 'apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'translated_at_apiserver' })).toBeGreaterThan(0);
    expect(await scrapeCounter(fx.url, 'kube_stream_proxy_upstream_streaming_fallbacks_total', { from: 'websocket', to: 'spdy' })).toBeGreaterThan(0);
    // H07, H08, H82 (no version the reverse translator serves) and H71 (no stream): the upstream's answer only.
    expect(await scrapeCounter(fx.url, 'kube_stream_proxy_upstream_streaming_fallbacks_total', { from: 'spdy' })).toBe(0);
  });
});
