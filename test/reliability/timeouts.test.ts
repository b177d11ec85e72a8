/**
 * Issue 26, finding 5: the listener's timeouts are set as documented (Fastify's own options do not
 * reach a server it did not create), in kube-apiserver's terms — the head within the header timeout,
 * no total request timeout (bodies and long-running requests are never cut), `--request-timeout`
 * for the rest — and an upstream answer that arrives while the body is still streaming is relayed.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';
import { HEADERS_TIMEOUT_MS, KEEP_ALIVE_TIMEOUT_MS, startServer, type RunningServer } from '../../src/server.js';
import { REQUEST_TIMEOUT_MESSAGE } from '../../handlers/reverse-proxy.js';
import { startPipelinedUpstream, type PipelinedUpstream } from '../security/pipelined-upstream.js';

describe('listener and request timeouts', () => {
  let upstream: PipelinedUpstream;
  let proxy: RunningServer;
  beforeAll(async () => {
    upstream = await startPipelinedUpstream({ answer: (r) => (r.path.startsWith('/hang') ? { hang: true } : undefined) });
    proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: upstream.url, requestTimeout: '1s' }), { headersTimeoutMs: 1_000 });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('sets them on the server itself: no total request timeout, kube-apiserver\'s head and idle timeouts', async () => {
    const plain = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: upstream.url }));
    try {
      const server = plain.app.server as unknown as { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number };
      expect({ headersTimeout: server.headersTimeout, requestTimeout: server.requestTimeout, keepAliveTimeout: server.keepAliveTimeout }).toEqual({
        headersTimeout: HEADERS_TIMEOUT_MS,
        requestTimeout: 0,
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      });
    } finally {
      await plain.close();
    }
  });

  it('answers a head that does not arrive within the header timeout with 408 and closes', async () => {
    const socket = connect(Number(new URL(proxy.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write('GET /api/v1/namespaces HTTP/1.1\r\nHost: proxy\r\n');
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    await once(socket, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"reason":"Timeout"');
  });

  it('does not cut a request body that streams longer than the header timeout (no total request timeout)', async () => {
    const parts = 6;
    const noRequestTimeout = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: upstream.url }), { headersTimeoutMs: 1_000 });
    const status = await new Promise<number>((resolve, reject) => {
      const u = new URL(noRequestTimeout.url);
      const req = httpRequest({ host: u.hostname, port: Number(u.port), method: 'POST', path: '/api/v1/namespaces/default/configmaps?slow', headers: { 'content-length': String(parts * 1024) } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      let n = 0;
      const next = (): void => {
        req.write(Buffer.alloc(1024, 0x61));
        if (++n < parts) setTimeout(next, 400);
        else req.end();
      };
      next();
    }).finally(() => noRequestTimeout.close());
    expect(status).toBe(200);
    const seen = upstream.callerRequests().find((r) => r.target.endsWith('?slow'));
    expect(seen?.body.length).toBe(parts * 1024);
  });

  it('--request-timeout: 504 Timeout Status for a request that is not long-running', async () => {
    const started = Date.now();
    const res = await fetch(`${proxy.url}/hang/api`);
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ kind: 'Status', code: 504, reason: 'Timeout', message: REQUEST_TIMEOUT_MESSAGE });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('--request-timeout leaves a watch alone', async () => {
    const controller = new AbortController();
    const outcome = fetch(`${proxy.url}/hang/api/v1/pods?watch=true`, { signal: controller.signal }).then(
      (r) => `answered ${r.status}`,
      (e: Error) => (e.name === 'AbortError' ? 'still open' : `failed ${e.message}`),
    );
    // Past the 1 s timeout (and its 2 s connection check), the watch is still waiting for its upstream.
    await new Promise((r) => setTimeout(r, 2_500));
    controller.abort();
    expect(await outcome).toBe('still open');
  });
});

describe('an upstream answer while the request body is still streaming', () => {
  let proxy: RunningServer;
  let server: ReturnType<typeof createServer>;
  beforeAll(async () => {
    // Go's net/http for a body it will not read (413 from MaxBytesReader): answer, FIN, and close
    // 500 ms later (rstAvoidanceDelay) whatever is still unread.
    server = createServer((s: Socket) => {
      let head = '';
      s.on('error', () => {});
      s.on('data', (d: Buffer) => {
        if (head.includes('\r\n\r\n')) return;
        head += d.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        const body = '{"kind":"Status","apiVersion":"v1","status":"Failure","code":413,"reason":"RequestEntityTooLarge"}';
        s.end(`HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
        setTimeout(() => s.destroy(), 500);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
  afterAll(async () => {
    await proxy?.close();
    server?.close();
  });

  it('relays the upstream\'s 413 as it sent it, to a fast and to a slow sender', async () => {
    for (const pause of [0, 50]) {
      const got = await new Promise<string>((resolve) => {
        const u = new URL(proxy.url);
        const chunks = 40;
        const req = httpRequest({ host: u.hostname, port: Number(u.port), method: 'POST', path: '/api/v1/namespaces/default/configmaps', headers: { 'content-length': String(chunks * 64 * 1024) } }, (res) => {
          let b = '';
          res.on('data', (c: Buffer) => (b += c.toString()));
          res.on('end', () => resolve(`${res.statusCode} ${b}`));
        });
        req.on('error', (e) => resolve(`error ${e.message}`));
        let n = 0;
        const pump = (): void => {
          while (n < chunks && !req.destroyed) {
            n++;
            const more = req.write(Buffer.alloc(64 * 1024));
            if (pause > 0) return void setTimeout(pump, pause);
            if (!more) return void req.once('drain', pump);
          }
        };
        pump();
      });
      expect(got, `pause ${pause} ms`).toMatch(/^413 \{"kind":"Status".*"reason":"RequestEntityTooLarge"\}$/);
    }
  });
});
