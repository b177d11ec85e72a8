/**
 * Test fixture (not a test): raw streaming clients the dev cluster's tests share — a SPDY/3.1 exec
 * upgrade answered or refused, and one echo through a SPDY port-forward connection (however it is
 * carried: a kubelet's SPDY upgrade, or the WebSocket tunnel).
 */
import { request as httpRequest } from 'node:http';
import type { SpdyConnection } from '../../../src/spdy/index.js';

/** POST a SPDY/3.1 upgrade (v4) to `url`: 101 (socket dropped), or the refusal's status, Content-Type and body. */
export function spdyUpgradeAnswer(url: string | URL): Promise<{ status: number; contentType?: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io', 'Content-Length': '0' },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ...(res.headers['content-type'] ? { contentType: res.headers['content-type'] } : {}), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Open the error and data streams for `port` on a SPDY port-forward connection, send `text`, resolve with what came back. */
export async function portForwardEcho(connection: SpdyConnection, port: number, text: string): Promise<string> {
  const error = await connection.openStream({ streamType: 'error', port, requestID: '0' });
  error.end();
  const data = await connection.openStream({ streamType: 'data', port, requestID: '0' });
  const back = new Promise<string>((resolve) => {
    let got = '';
    data.on('data', (c: Buffer) => {
      got += c.toString();
      if (got.length >= text.length) resolve(got);
    });
  });
  data.write(text);
  return back;
}
