/**
 * Malformed-input catalogue, WebSocket: every case of malformed-websocket-cases.ts runs on its own
 * translated exec session; the outcome is reduced to its canonical form and must equal the case's
 * `expected`. After every case: no TCP connection of the proxy, the relay or the dev cluster is left
 * open, and a fresh exec session (64 KiB through `cat`, byte-checked) still works.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBSOCKET_CASES, type WebSocketCase } from './malformed-websocket-cases.js';
import {
  answerEnd,
  execPath,
  afterCase,
  parseHttpAnswer,
  connectRaw,
  type Raw,
  RawWs,
  startMalformedFixture,
  wsChannel,
  wsClose,
  wsUpgradeRequest,
  WS_OP,
  type MalformedFixture,
} from './malformed-fixture.js';

let fx: MalformedFixture;
beforeAll(async () => {
  // The W cases are frames on the proxy's translated session: the proxy translates v5 itself (issue
  // 32: the 1.36 dev cluster takes v5, so asked first it would be its translator that meets them).
  fx = await startMalformedFixture({ flags: { upstreamStreaming: 'spdy' } });
});
afterAll(async () => {
  await fx?.close();
});

const DEFAULT_QUERY = 'command=cat&stdin=true&stdout=true&stderr=true';

async function runCase(c: WebSocketCase): Promise<string> {
  const query = c.query ?? DEFAULT_QUERY;
  const tty = /tty=true/.test(query);
  const sent = c.send();
  const bytes = Array.isArray(sent) ? sent : [sent];
  const raw = await connectRaw(fx.proxyPort);
  try {
    raw.write(c.early ? Buffer.concat([Buffer.from(wsUpgradeRequest(execPath(query))), ...bytes]) : wsUpgradeRequest(execPath(query)));
    await raw.until((b) => answerEnd(b) >= 0, '101');
    expect(parseHttpAnswer(raw.received).status).toBe(101);
    const ws = await RawWs.adopt(raw);
    if (!c.early) for (const part of bytes) raw.write(part);
    if (c.fin) raw.socket.end();
    const closeFrame = (): boolean => ws.frames().some((f) => f.opcode === WS_OP.CLOSE);
    if (!c.noProbe) {
      const marker = `marker-${randomBytes(16).toString('hex')}\n`;
      ws.send(wsChannel(0, marker));
      await raw.until(() => ws.channelBytes(1).toString('latin1').includes(marker.trim()) || closeFrame(), 'the echo, or a close frame').catch((e: Error) => {
        if (!raw.ended) throw e;
      });
      if (ws.channelBytes(1).toString('latin1').includes(marker.trim())) {
        if (c.pongs !== undefined) {
          await raw.until(() => ws.frames().filter((f) => f.opcode === WS_OP.PONG).length >= c.pongs!, `${c.pongs} pongs`);
        }
        // End the session: ^D on a terminal, CLOSE of stdin otherwise; Success, then close 1000.
        ws.send(tty ? wsChannel(0, '\u0004') : wsFrameClose0());
        const st = await ws.status();
        const code = await ws.closeCode();
        ws.send(wsClose(1000));
        // A terminal session may end on SIGHUP (129) when ^D races the pty's close; it was served.
        if ((st.status === 'Success' || (tty && st.reason === 'NonZeroExitCode')) && code === 1000) return 'served';
        return `echoed, then channel 3: ${JSON.stringify(st)}, close ${code}`;
      }
    } else {
      await raw.until(() => closeFrame(), 'a close frame').catch((e: Error) => {
        if (!raw.ended) throw e;
      });
    }
    // The session ended: report the Status, the close code and whether the connection closed.
    const parts: string[] = [];
    const statusFrame = ws.frames().find((f) => f.opcode === WS_OP.BINARY && f.payload[0] === 3 && f.payload.length > 1);
    if (statusFrame) {
      const st = JSON.parse(statusFrame.payload.subarray(1).toString()) as { status: string; reason?: string; code?: number; message?: string };
      parts.push(`channel 3: ${st.status}${st.reason ? ` ${st.code} ${st.reason} ${JSON.stringify(st.message)}` : ''}`);
    }
    const close = ws.frames().find((f) => f.opcode === WS_OP.CLOSE);
    // Answer the server's close as a client does; then the server must close the connection.
    if (close && !raw.ended) ws.send(wsClose(1000));
    if (close) parts.push(`close ${close.payload.length >= 2 ? close.payload.readUInt16BE(0) : 1005}`);
    else if (!c.fin) parts.push('dropped');
    await raw.closed().then(
      () => parts.push('closed'),
      () => parts.push('still open'),
    );
    return parts.join(', ');
  } finally {
    raw.destroy();
  }
}

function wsFrameClose0(): Buffer {
  return wsChannelRaw(Buffer.from([255, 0]));
}
function wsChannelRaw(payload: Buffer): Buffer {
  // A binary message whose first byte is not a channel (the CLOSE signal).
  return wsChannel(payload[0]!, payload.subarray(1));
}

describe('malformed WebSocket input (translated exec session)', { timeout: 30_000 }, () => {
  it('has at least 50 cases with unique ids', () => {
    expect(WEBSOCKET_CASES.length).toBeGreaterThanOrEqual(50);
    expect(new Set(WEBSOCKET_CASES.map((c) => c.id)).size).toBe(WEBSOCKET_CASES.length);
  });

  it.each(WEBSOCKET_CASES.map((c, i) => [`${c.id} ${c.title}`, c, i] as const))('%s', async (_name, c, i) => {
    const observed = await runCase(c);
    if (process.env.MALFORMED_PRINT) appendFileSync(process.env.MALFORMED_PRINT, `${c.id}\t${JSON.stringify(observed)}\n`);
    await afterCase(fx, i, WEBSOCKET_CASES.length);
    expect(observed).toBe(c.knownGap ? c.observed : c.expected);
  });
});
