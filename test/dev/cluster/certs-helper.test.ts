import { X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, connect, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, OPENSSL, subjectArg, type TestPki } from '../../helpers/certs.js';

let dir: string;
let pki: TestPki;
let elapsedMs: number;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'certs-helper-'));
  const started = performance.now();
  pki = await createTestPki(dir, {
    proxy: { cn: 'system:kube-apiserver-kubelet-client', groups: ['system:masters', 'kubelet/api'] },
    alice: { cn: 'alice' },
  });
  elapsedMs = performance.now() - started;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('test PKI helper', () => {
  it('is fast (EC P-256)', () => {
    expect(elapsedMs).toBeLessThan(5_000);
    expect(new X509Certificate(pki.ca.cert).publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: 'prime256v1' });
  });

  it('writes PEM files matching the returned buffers', () => {
    for (const c of [pki.ca, pki.server, pki.clients.proxy!, pki.clients.alice!]) {
      expect(c.cert.toString()).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
      expect(c.key.toString()).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
      expect(statSync(c.certFile).size).toBe(c.cert.length);
      expect(statSync(c.keyFile).size).toBe(c.key.length);
    }
  });

  it('makes a CA, and certificates it issued', () => {
    const ca = new X509Certificate(pki.ca.cert);
    expect(ca.ca).toBe(true);
    for (const c of [pki.server, pki.clients.proxy!]) {
      const x = new X509Certificate(c.cert);
      expect(x.ca).toBe(false);
      expect(x.checkIssued(ca)).toBe(true);
      expect(x.verify(ca.publicKey)).toBe(true);
    }
    const out = execFileSync(OPENSSL, ['verify', '-CAfile', pki.ca.certFile, pki.server.certFile, pki.clients.proxy!.certFile]).toString();
    expect(out).toBe(`${pki.server.certFile}: OK\n${pki.clients.proxy!.certFile}: OK\n`);
  });

  it('gives the server certificate SAN IP:127.0.0.1,DNS:localhost', () => {
    const x = new X509Certificate(pki.server.cert);
    expect(x.subjectAltName).toBe('IP Address:127.0.0.1, DNS:localhost');
    expect(x.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(x.checkHost('localhost')).toBe('localhost');
  });

  it('puts the user in CN and the groups in O, escaping a slash', () => {
    expect(new X509Certificate(pki.clients.proxy!.cert).subject).toBe(
      'O=system:masters\nO=kubelet/api\nCN=system:kube-apiserver-kubelet-client',
    );
    expect(new X509Certificate(pki.clients.alice!.cert).subject).toBe('CN=alice');
    expect(subjectArg('a/b', ['g'])).toBe('/O=g/CN=a\\/b');
  });

  it('works for a real mutual-TLS handshake on loopback', async () => {
    const server = createServer(
      { cert: pki.server.cert, key: pki.server.key, ca: pki.ca.cert, requestCert: true, rejectUnauthorized: true },
      (s) => s.end(`hello ${(s.getPeerCertificate() as { subject: { CN: string } }).subject.CN}`),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const text = await new Promise<string>((resolve, reject) => {
        const s: TLSSocket = connect({ host: '127.0.0.1', port, ca: pki.ca.cert, cert: pki.clients.alice!.cert, key: pki.clients.alice!.key });
        let got = '';
        s.setEncoding('utf8').on('data', (c: string) => (got += c)).on('end', () => resolve(got)).on('error', reject);
      });
      expect(text).toBe('hello alice');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
