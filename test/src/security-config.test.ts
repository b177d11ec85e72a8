/**
 * The security flags of `serve`: modes, the combinations refused at start-up, and the warnings every
 * insecure setting produces (TLS is verified on every upstream leg unless a flag says otherwise).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { createTestPki, type TestPki } from '../helpers/certs.js';

let dir: string;
let pki: TestPki;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-security-config-'));
  pki = await createTestPki(dir, { kubelet: { cn: 'kube-stream-proxy' } });
  writeFileSync(join(dir, 'token'), 'abc');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const base = (): ServeFlags => ({ listen: '127.0.0.1:0', upstream: 'https://127.0.0.1:6443', upstreamCaFile: pki.ca.certFile, upstreamTokenFile: join(dir, 'token') });
const kubelet = (): ServeFlags => ({
  ...base(),
  upstreamMode: 'kubelet',
  kubeletClientCertificate: pki.clients.kubelet!.certFile,
  kubeletClientKey: pki.clients.kubelet!.keyFile,
  kubeletCertificateAuthority: pki.ca.certFile,
});

describe('security configuration', () => {
  it('defaults to apiserver + passthrough with no warning; kubelet mode defaults to impersonate', async () => {
    const c = await resolveConfig(base());
    expect(c.security).toMatchObject({ upstreamMode: 'apiserver', authn: 'passthrough', warnings: [] });
    const k = await resolveConfig(kubelet());
    expect(k.security).toMatchObject({ upstreamMode: 'kubelet', authn: 'impersonate', warnings: [] });
    expect(k.security?.kubelet?.preferredAddressTypes).toEqual(['Hostname', 'InternalDNS', 'InternalIP', 'ExternalDNS', 'ExternalIP']);
  });

  it.each([
    [{ upstreamMode: 'node' }, '--upstream-mode: want apiserver or kubelet'],
    [{ authn: 'anonymous' }, '--authn: want passthrough or impersonate'],
    [{ upstreamMode: 'kubelet', authn: 'passthrough' }, '--upstream-mode=kubelet needs --authn=impersonate'],
    [{ upstreamMode: 'kubelet' }, '--upstream-mode=kubelet needs --kubelet-client-certificate'],
    [{ kubeletCertificateAuthority: '/x' }, '--kubelet-* flags need --upstream-mode=kubelet'],
    [{ authn: 'impersonate', clientCaFile: '/x' }, 'need an HTTPS listener'],
  ] as [ServeFlags, string][])('refuses %j', async (flags, message) => {
    await expect(resolveConfig({ ...base(), ...flags })).rejects.toThrow(message);
  });

  it('kubelet mode without a kubelet CA is refused unless --kubelet-insecure-skip-tls-verify, which warns', async () => {
    const { kubeletCertificateAuthority: _, ...noCa } = kubelet();
    await expect(resolveConfig(noCa)).rejects.toThrow('needs --kubelet-certificate-authority');
    const insecure = await resolveConfig({ ...noCa, kubeletInsecureSkipTlsVerify: true });
    expect(insecure.security?.warnings).toEqual(['--kubelet-insecure-skip-tls-verify: kubelet serving certificates are NOT verified']);
    expect(insecure.security?.kubelet?.insecureSkipTlsVerify).toBe(true);
  });

  it('--upstream-insecure-skip-tls-verify turns verification off and warns; it needs https', async () => {
    const c = await resolveConfig({ ...base(), upstreamInsecureSkipTlsVerify: true });
    expect(c.upstream!.tls?.rejectUnauthorized).toBe(false);
    expect(c.security?.warnings).toEqual(['--upstream-insecure-skip-tls-verify: the upstream serving certificate is NOT verified']);
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1', upstreamInsecureSkipTlsVerify: true })).rejects.toThrow('needs an https --upstream');
    expect((await resolveConfig(base())).upstream!.tls?.rejectUnauthorized).toBe(true);
  });

  it('a client CA file must hold certificates', async () => {
    writeFileSync(join(dir, 'garbage.pem'), 'not a certificate');
    await expect(
      resolveConfig({ ...base(), authn: 'impersonate', tlsCertFile: pki.server.certFile, tlsPrivateKeyFile: pki.server.keyFile, clientCaFile: join(dir, 'garbage.pem') }),
    ).rejects.toThrow('--client-ca-file');
  });
});
