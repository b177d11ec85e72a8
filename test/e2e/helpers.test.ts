/**
 * Self-tests of the end-to-end helpers (no dev cluster needed): deterministic data, hashing, the HTTP
 * fixture, kubectl discovery and environment scrubbing, and the tmux terminal driver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { deterministicBytes, deterministicDigest, deterministicStream, repeatedPatternDigest, writeDeterministicFile } from '../helpers/random-data.js';
import { sha256, sha256File, sha256Stream } from '../helpers/hash.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl } from '../helpers/kubectl.js';
import { startTmux } from '../helpers/tty.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';

const work = mkdtempSync(join(tmpdir(), 'ksp-helpers-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('deterministic data', () => {
  it('is independent of chunking and differs by seed', async () => {
    const whole = deterministicBytes(7, 1_000_003);
    expect((await sha256Stream(deterministicStream(7, 1_000_003, 4096))).sha256).toBe(sha256(whole));
    expect(deterministicDigest(7, 1_000_003)).toEqual({ sha256: sha256(whole), byteLength: 1_000_003 });
    expect(sha256(deterministicBytes(8, 1000))).not.toBe(sha256(whole.subarray(0, 1000)));
    // Not degenerate: roughly uniform bytes.
    const counts = new Array(256).fill(0);
    for (const b of whole) counts[b]++;
    expect(Math.min(...counts)).toBeGreaterThan(3000);
  });

  it('writes files with the advertised digest', async () => {
    const p = join(work, 'f.bin');
    const d = await writeDeterministicFile(p, 3, 5_000_001);
    expect(await sha256File(p)).toEqual(d);
  });

  it('matches `yes abcdefghij | head -c N`', () => {
    const n = 3_000_007;
    const out = execFileSync('sh', ['-c', `yes abcdefghij | head -c ${n}`], { maxBuffer: 8 << 20 });
    expect(repeatedPatternDigest('abcdefghij\n', n)).toEqual({ sha256: createHash('sha256').update(out).digest('hex'), byteLength: n });
  });
});

describe('HTTP fixture', () => {
  let server: BytesServer;
  beforeAll(async () => {
    server = await startBytesServer();
  });
  afterAll(() => server.close());

  it('serves /bytes/N byte-exact, concurrently', async () => {
    const sizes = [0, 1, 4_194_307, 10_000_000];
    const results = await Promise.all(sizes.map((n, i) => downloadDigest(`${server.url}/bytes/${n}?seed=${i + 1}`)));
    results.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect({ sha256: r.sha256, byteLength: r.byteLength }).toEqual(server.expected(sizes[i]!, i + 1));
      expect(r.headerSha256).toBe(r.sha256);
    });
  });
});

describe('kubectl discovery and environment', () => {
  it('scrubs proxies, KUBECONFIG and KUBECTL_* toggles from the parent', () => {
    const saved = { ...process.env };
    try {
      Object.assign(process.env, {
        HTTPS_PROXY: 'http://127.0.0.1:9',
        http_proxy: 'http://127.0.0.1:9',
        NO_PROXY: 'x',
        KUBECONFIG: '/nonexistent',
        KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true',
      });
      const env = kubectlEnv('/tmp/kc', { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' });
      expect(Object.keys(env).filter((k) => /proxy/i.test(k))).toEqual([]);
      expect(env.KUBECONFIG).toBe('/tmp/kc');
      expect(env.KUBECTL_REMOTE_COMMAND_WEBSOCKETS).toBeUndefined();
      expect(env.KUBECTL_PORT_FORWARD_WEBSOCKETS).toBe('false');
      expect(() => kubectlEnv('/tmp/kc', { HTTPS_PROXY: 'x' })).toThrow(/proxy/);
    } finally {
      process.env = saved;
    }
  });

  it.skipIf(kubectlE2eSkipReason() !== undefined)('finds kubectl 1.27 … 1.33 and runs them with our kubeconfig only', async () => {
    for (const v of ['1.27', '1.28', '1.29', '1.30', '1.31', '1.32', '1.33'] as const) expect(findKubectl(v)).toMatch(new RegExp(`kubectl\\.${v.replace('.', '\\.')}$`));
    const kc = join(work, 'kubeconfig');
    writeKubeconfig(kc, { server: 'http://127.0.0.1:9', name: 'helpers-selftest' });
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = join(work, 'other-kubeconfig');
    try {
      const r = await runKubectl(findKubectl('1.28'), ['config', 'current-context'], { kubeconfig: kc, timeoutMs: 20_000 });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.toString()).toBe('helpers-selftest\n');
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it('reports a clear error when a binary is missing', () => {
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent-dir';
    try {
      expect(() => findKubectl('1.27')).toThrow(/kubectl\.1\.27 not found[\s\S]*\/nonexistent-dir\/kubectl\.1\.27[\s\S]*SKIP_KUBECTL_E2E=1/);
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe('tmux terminal driver', () => {
  it('reports the terminal size and follows resize-window', async () => {
    const tty = await startTmux({ argv: ['/bin/sh'], env: { PATH: process.env.PATH, HOME: work, PS1: 'tty-test$ ' } });
    try {
      await tty.waitForScreen((s) => s.includes('tty-test$'), 10_000);
      await tty.sendLine('stty size');
      await tty.waitForScreen((s) => s.split('\n').includes('30 100'), 10_000);
      await tty.resize(120, 40);
      const query = (): Promise<void> => tty.sendLine('stty size');
      await query();
      await tty.waitForScreen((s) => s.split('\n').includes('40 120'), 10_000, { onPoll: query, retryEveryMs: 1000 });
      await tty.sendLine('exit 4');
      expect(await tty.waitForExit(10_000)).toBe(4);
    } finally {
      await tty.kill();
    }
  });
});
