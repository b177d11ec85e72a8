/**
 * Issue 24, the npm package: `npm pack` makes a tarball of what runs (no tests, benchmarks, sources or
 * source maps), it installs into an empty folder with `npm install ./kube-stream-proxy-*.tgz`, and
 * `npx kube-stream-proxy --help`, `serve --help` and `demo` work from there, up to a real kubectl exec.
 * Without optional dependencies (`--omit=optional`), node-pty is absent and everything but a terminal
 * still works: `exec -t` is refused before the upgrade with a Status naming the package.
 *
 * One install from the tarball serves both (installing is most of this file's time): the
 * no-optional folder is a copy of the full install (`cp -a`) on which `npm install --omit=optional`
 * removes the optional packages and what only they need, the tree a fresh `npm install
 * --omit=optional ./kube-stream-proxy-*.tgz` lays out (npm resolves optional dependencies into the
 * lockfile either way and leaves them off the disk); the test checks node-pty is gone from it.
 *
 * The install resolves dependencies from npm's cache first (`--prefer-offline`), from the registry
 * for what the cache lacks, as a user's install does.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlEnv } from '../helpers/kubectl.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const work = mkdtempSync(join(tmpdir(), 'ksp-package-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Packed size bounds: what runs is about 0.5 MB packed, 1.8 MB unpacked. */
const MAX_PACKED_BYTES = 1024 * 1024;
const MAX_UNPACKED_BYTES = 4 * 1024 * 1024;

interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  files: Array<{ path: string }>;
}

/** Install the tarball into a new folder; returns the folder. */
async function installInto(name: string, tarball: string): Promise<string> {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `try-${name}`, version: '1.0.0', private: true }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: dir, timeout: 300_000, maxBuffer: 16 << 20 });
  return dir;
}

/**
 * A copy of the install in `from` (a sibling folder, so its `file:../…tgz` dependency still
 * resolves) without optional dependencies: `npm install --omit=optional` there removes them.
 */
async function withoutOptional(from: string, name: string): Promise<string> {
  const dir = join(work, name);
  await run('cp', ['-a', from, dir]);
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--omit=optional'], { cwd: dir, timeout: 300_000, maxBuffer: 16 << 20 });
  return dir;
}

/** Run `npx kube-stream-proxy demo` in `dir` until it is ready; returns its kubeconfig and a stop function. */
async function startDemoIn(dir: string): Promise<{ kubeconfig: string; proxyUrl: URL; stop: () => Promise<void>; output: () => string }> {
  const child = spawn('npx', ['kube-stream-proxy', 'demo', '--listen', '127.0.0.1:0'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exit = once(child, 'exit');
  const deadline = Date.now() + 90_000;
  while (!/^kubeconfig written to (.+)$/m.test(out) || !/^kube-stream-proxy listening on (\S+),/m.test(out)) {
    if (child.exitCode !== null) throw new Error(`demo exited ${child.exitCode}:\n${out}`);
    if (Date.now() > deadline) throw new Error(`demo not ready after 90 s:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const kubeconfig = /^kubeconfig written to (.+)$/m.exec(out)![1]!;
  const proxyUrl = new URL(/^kube-stream-proxy listening on (\S+),/m.exec(out)![1]!);
  return {
    kubeconfig,
    proxyUrl,
    output: () => out,
    // npx, node and the demo form one process group: SIGTERM to the group, as a terminal's Ctrl-C would.
    stop: async () => {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
      await exit;
    },
  };
}

describe('the npm package', () => {
  let pack: PackResult;
  let tarball: string;
  beforeAll(async () => {
    // Scripts off: `npm test` has built dist/ already, and a rebuild now would race the other test files.
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: ROOT, maxBuffer: 16 << 20 });
    pack = (JSON.parse(stdout) as PackResult[])[0]!;
    tarball = join(work, pack.filename);
  }, 120_000);

  it('holds what runs, and no tests, benchmarks, TypeScript sources or source maps', () => {
    const paths = pack.files.map((f) => f.path);
    for (const needed of ['bin/kube-stream-proxy.js', 'dist/src/cli.js', 'dist/src/server.js', 'dist/dev/demo.js', 'dist/dev/cluster/dev-cluster.js', 'native/splice.c', 'binding.gyp', 'README.md', 'LICENSE', 'package.json']) {
      expect(paths, needed).toContain(needed);
    }
    const unwanted = paths.filter((p) => /^(test|bench|src|dev|handlers|proxy|translator)\//.test(p) || /^dist\/(test|bench)\//.test(p) || /\.ts$/.test(p) || /\.map$/.test(p));
    expect(unwanted).toEqual([]);
    expect(pack.size).toBeLessThan(MAX_PACKED_BYTES);
    expect(pack.unpackedSize).toBeLessThan(MAX_UNPACKED_BYTES);
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { private?: boolean; optionalDependencies?: Record<string, string>; dependencies: Record<string, string> };
    expect(manifest.private).toBeUndefined();
    // node-pty (the dev cluster's terminals) and oidc-provider (`demo --oidc`'s issuer): both loaded on first use, never by `serve`.
    expect(Object.keys(manifest.optionalDependencies ?? {})).toEqual(['node-pty', 'oidc-provider']);
    expect(manifest.dependencies['node-pty']).toBeUndefined();
  });

  it('approves exactly the install scripts it needs: npm ci has none left to warn about', async () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    expect(manifest.allowScripts).toEqual({ bufferutil: true, 'node-pty': true });
    const { stdout } = await run('npm', ['install-scripts', 'ls'], { cwd: ROOT });
    expect(stdout).toContain('No packages with unreviewed install scripts.');
  });

  describe('installed from the tarball', () => {
    let fullDir: string;
    let noOptionalDir: string;
    beforeAll(async () => {
      fullDir = await installInto('full', tarball);
      noOptionalDir = await withoutOptional(fullDir, 'no-optional');
    }, 300_000);

    it('installs into an empty folder and runs with npx: --help, serve --help, demo with a kubectl exec', async () => {
      const dir = fullDir;
      expect(existsSync(join(dir, 'node_modules', 'node-pty')), 'the full install has node-pty').toBe(true);
      const help = await run('npx', ['kube-stream-proxy', '--help'], { cwd: dir });
      expect(help.stdout).toContain('Commands:');
      const serveHelp = await run('npx', ['kube-stream-proxy', 'serve', '--help'], { cwd: dir });
      expect(serveHelp.stdout).toContain('--upstream');
      const demo = await startDemoIn(dir);
      try {
        const exec = await run(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'hello-from-npx'], { env: kubectlEnv(demo.kubeconfig) });
        expect(exec.stdout).toBe('hello-from-npx\n');
      } finally {
        await demo.stop();
      }
    }, 300_000);

    it('without optional dependencies: no node-pty, the demo serves exec, and exec -t is refused naming the package', async () => {
      const dir = noOptionalDir;
      expect(existsSync(join(dir, 'node_modules', 'node-pty')), 'node-pty removed').toBe(false);
      const ls = await run('npm', ['ls', '--omit=optional', '--all', '--parseable'], { cwd: dir, maxBuffer: 16 << 20 }).catch((e: { stdout: string }) => e);
      expect(ls.stdout).not.toContain('node-pty');
      const demo = await startDemoIn(dir);
      try {
        const exec = await run(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'no-pty-needed'], { env: kubectlEnv(demo.kubeconfig) });
        expect(exec.stdout).toBe('no-pty-needed\n');
        // A tty exec (SPDY, as kubectl sends it): the dev cluster's refusal comes back before any upgrade.
        const answer = await new Promise<{ status: number; body: string }>((resolveAnswer, reject) => {
          const req = request(
            new URL('/api/v1/namespaces/default/pods/demo/exec?command=sh&stdin=true&stdout=true&tty=true', demo.proxyUrl),
            { method: 'POST', headers: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io', 'Content-Length': '0' } },
            (res) => {
              let body = '';
              res.on('data', (d: Buffer) => (body += d.toString()));
              res.on('end', () => resolveAnswer({ status: res.statusCode ?? 0, body }));
            },
          );
          req.on('upgrade', () => reject(new Error('upgraded: a tty exec was served without node-pty')));
          req.on('error', reject);
          req.end();
        });
        expect(answer.status).toBe(500);
        expect(JSON.parse(answer.body)).toMatchObject({ kind: 'Status', code: 500 });
        expect(answer.body).toContain('node-pty');
      } finally {
        await demo.stop();
      }
    }, 300_000);
  });
});
