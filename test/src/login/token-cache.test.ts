import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execCredential, jwtExpiry, readExecInfo, rfc3339 } from '../../../src/login/exec-credential.js';
import { defaultTokenCacheDir, TokenCache, tokenCacheName } from '../../../src/login/token-cache.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ksp-cache-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const key = { issuer: 'https://issuer.example.com', clientId: 'k', scopes: ['openid', 'email'] };

describe('TokenCache', () => {
  it('saves 0600 in a 0700 directory, loads back, clears', async () => {
    const c = new TokenCache(join(dir, 'sub'), key);
    expect(await c.load()).toEqual({});
    await c.save({ id_token: 'a.b.c', refresh_token: 'r' });
    expect((await stat(c.file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'sub'))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(c.file, 'utf8'))).toEqual({ id_token: 'a.b.c', refresh_token: 'r' });
    expect(await new TokenCache(join(dir, 'sub'), key).load()).toEqual({ id_token: 'a.b.c', refresh_token: 'r' });
    await c.clear();
    expect(await c.load()).toEqual({});
  });

  it('names files by the settings: scope order does not matter, anything else does', () => {
    expect(tokenCacheName({ ...key, scopes: ['email', 'openid'] })).toBe(tokenCacheName(key));
    expect(tokenCacheName({ ...key, clientId: 'other' })).not.toBe(tokenCacheName(key));
    expect(tokenCacheName({ ...key, extraParams: { prompt: 'consent' } })).not.toBe(tokenCacheName(key));
    expect(tokenCacheName(key)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('the default directory follows KUBECACHEDIR', () => {
    expect(defaultTokenCacheDir({ KUBECACHEDIR: '/tmp/kc' })).toBe('/tmp/kc/kube-stream-proxy');
    expect(defaultTokenCacheDir({})).toMatch(/\/\.kube\/cache\/kube-stream-proxy$/);
  });

  it('the lock makes a second holder wait, and a dead owner\'s lock is taken over', async () => {
    const a = new TokenCache(dir, key);
    const b = new TokenCache(dir, key);
    await a.lock(1000);
    let bHas = false;
    const bLocked = b.lock(5000, 10).then(() => (bHas = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(bHas).toBe(false);
    await a.unlock();
    await bLocked;
    expect(bHas).toBe(true);
    await b.unlock();
    // A lock left by a process that is gone.
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    await writeFile(join(dir, `${tokenCacheName(key)}.lock`), dead);
    await a.lock(1000, 10);
    await a.unlock();
    // A live owner holds it past the timeout.
    await writeFile(join(dir, `${tokenCacheName(key)}.lock`), String(process.pid));
    await expect(b.lock(50, 10)).rejects.toThrow(/another login holds/);
  });
});

describe('ExecCredential', () => {
  it('answers in the apiVersion kubectl asked for, without fractional seconds', () => {
    const info = readExecInfo({ KUBERNETES_EXEC_INFO: JSON.stringify({ kind: 'ExecCredential', apiVersion: 'client.authentication.k8s.io/v1beta1', spec: { interactive: true } }) });
    expect(info).toEqual({ apiVersion: 'client.authentication.k8s.io/v1beta1', interactive: true });
    expect(JSON.parse(execCredential(info, 't', Date.UTC(2030, 0, 2, 3, 4, 5, 678)))).toEqual({
      kind: 'ExecCredential',
      apiVersion: 'client.authentication.k8s.io/v1beta1',
      spec: { interactive: true },
      status: { token: 't', expirationTimestamp: '2030-01-02T03:04:05Z' },
    });
    expect(readExecInfo({})).toEqual({ apiVersion: 'client.authentication.k8s.io/v1', interactive: false });
    expect(() => readExecInfo({ KUBERNETES_EXEC_INFO: 'nope' })).toThrow('KUBERNETES_EXEC_INFO is not JSON');
    expect(rfc3339(0)).toBe('1970-01-01T00:00:00Z');
  });

  it('reads exp of a JWT without verifying it', () => {
    const t = `x.${Buffer.from(JSON.stringify({ exp: 1700000000 })).toString('base64url')}.y`;
    expect(jwtExpiry(t)).toBe(1700000000 * 1000);
    expect(jwtExpiry('opaque')).toBeUndefined();
    expect(jwtExpiry(`x.${Buffer.from('[]').toString('base64url')}.y`)).toBeUndefined();
  });
});
