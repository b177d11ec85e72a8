import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { resolveConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { RawClient, spdyUpgradeRequest, startProxy, startScriptedUpstream, type ScriptedUpstream } from '../proxy/scripted-upstream.js';

const dir = mkdtempSync(join(tmpdir(), 'ksp-server-'));

/** A self-signed certificate for 127.0.0.1 (also its own CA). */
function selfSigned(name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' });
  return { cert, key };
}

let upstream: ScriptedUpstream;
beforeAll(async () => {
  upstream = await startScriptedUpstream();
});
afterAll(async () => {
  await upstream.close();
});

describe('startServer', () => {
  it('answers /healthz, /livez, /readyz and /metrics on the proxy listener, without proxying them', async () => {
    const proxy = await startProxy(upstream.url);
    try {
      for (const path of ['/healthz', '/livez', '/readyz']) {
        const res = await fetch(`${proxy.url}${path}`);
        expect(res.status, path).toBe(200);
        expect(await res.text()).toBe('ok');
      }
      const client = await RawClient.connect(proxy.url);
      client.socket.write(spdyUpgradeRequest('/api/v1/namespaces/default/pods/demo/exec'));
      const conn = await upstream.next();
      conn.socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      await client.end();

      const metrics = await (await fetch(`${proxy.url}/metrics`)).text();
      expect(metrics).toContain('kube_stream_proxy_http_requests_total{handler="health",code="200"} 3');
      expect(metrics).toContain('kube_stream_proxy_upgrade_requests_total{handler="exec",code="403"} 1');
      expect(metrics).toMatch(/^process_cpu_seconds_total /m);
    } finally {
      await proxy.close();
    }
  });

  it('serves HTTPS with --tls-cert-file/--tls-private-key-file on any address', async () => {
    const { cert, key } = selfSigned('proxy');
    const config = await resolveConfig({ listen: '127.0.0.1:0', tlsCertFile: cert, tlsPrivateKeyFile: key, upstream: upstream.url });
    const proxy = await startServer(config);
    try {
      expect(proxy.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const u = new URL(proxy.url);
      const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) =>
        httpsRequest({ host: u.hostname, port: u.port, path: '/livez', ca: readFileSync(cert), agent: false }, resolve).on('error', reject).end(),
      );
      expect(res.statusCode).toBe(200);
      res.resume();
    } finally {
      await proxy.close();
    }
  });

  it('dials an https upstream offering only ALPN http/1.1, trusting the configured CA, with none of the proxy\'s credentials on a caller\'s request', async () => {
    const server = selfSigned('upstream');
    const client = selfSigned('client');
    const offered: string[][] = [];
    const tlsUpstream = createTlsServer({
      cert: readFileSync(server.cert),
      key: readFileSync(server.key),
      ca: readFileSync(client.cert),
      requestCert: true,
      rejectUnauthorized: false, // so that a missing client certificate can be observed
      ALPNCallback: ({ protocols }) => {
        offered.push(protocols);
        return 'http/1.1';
      },
    });
    const heads: string[] = [];
    const peerCerts: number[] = [];
    tlsUpstream.on('secureConnection', (socket: TLSSocket) => {
      let buf = '';
      socket.on('data', (c: Buffer) => {
        buf += c.toString('latin1');
        if (!buf.includes('\r\n\r\n')) return;
        heads.push(buf);
        peerCerts.push(Object.keys(socket.getPeerCertificate()).length);
        socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
      });
    });
    tlsUpstream.listen(0, '127.0.0.1');
    await once(tlsUpstream, 'listening');
    const token = join(dir, 'token');
    execFileSync('sh', ['-c', `printf 'tls-token' > ${token}`]);
    const proxy = await startProxy(`https://127.0.0.1:${(tlsUpstream.address() as AddressInfo).port}`, {
      upstreamCaFile: server.cert,
      upstreamClientCertFile: client.cert,
      upstreamClientKeyFile: client.key,
      upstreamTokenFile: token,
    });
    try {
      const raw = await RawClient.connect(proxy.url);
      raw.socket.write(spdyUpgradeRequest());
      const got = await raw.until((b) => b.includes('\r\n\r\n'));
      expect(got.toString('latin1')).toMatch(/^HTTP\/1\.1 101 /);
      expect(offered).toEqual([['http/1.1']]);
      // Passthrough: the caller sent no credentials, so none arrive; the proxy's client
      // certificate and token are its own and never speak for a caller.
      expect(heads[0]).not.toMatch(/\r\nAuthorization:/i);
      expect(peerCerts).toEqual([0]);
      raw.socket.destroy();
    } finally {
      await proxy.close();
      tlsUpstream.close();
    }
  });

  it('closes upgraded connections on close()', async () => {
    const proxy = await startProxy(upstream.url);
    const client = await RawClient.connect(proxy.url);
    client.socket.write(spdyUpgradeRequest());
    const conn = await upstream.next();
    conn.socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n');
    await client.until((b) => b.includes('\r\n\r\n'));
    await proxy.close();
    await client.end();
  });
});
