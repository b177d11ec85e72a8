/**
 * The runtime the suite runs on: one that `engines` supports (CI runs the suite on the machine's Node
 * and on the pinned LTS, scripts/with-lts-node.sh), the same `node` for the processes the tests spawn
 * by name, and the native modules loaded natively (no JavaScript fallback) on it.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);

/** Whether `version` (x.y.z) satisfies a range made of `^x.y.z` alternatives joined by `||`. */
function satisfiesCaretRanges(version: string, range: string): boolean {
  const v = version.split('.').map(Number);
  return range.split('||').some((alt) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(alt);
    if (!m) throw new Error(`engines.node: only ^x.y.z alternatives are understood here, got "${alt.trim()}"`);
    const [maj, min, pat] = [Number(m[1]), Number(m[2]), Number(m[3])];
    return v[0] === maj && (v[1] > min || (v[1] === min && v[2] >= pat));
  });
}

describe('Node runtime', () => {
  it('is one that package.json engines supports', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(satisfiesCaretRanges(process.versions.node, pkg.engines.node), `Node ${process.versions.node} vs engines ${pkg.engines.node}`).toBe(true);
    expect(satisfiesCaretRanges('19.9.0', pkg.engines.node)).toBe(false);
  });

  it('is also the `node` on PATH, which the tests and the dev cluster spawn by name', () => {
    const r = spawnSync('node', ['-p', 'process.execPath + " " + process.version'], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(`${process.execPath} ${process.version}`);
  });

  it('loads bufferutil natively (N-API prebuild, not the JavaScript fallback)', () => {
    const dir = dirname(require.resolve('bufferutil'));
    const nodeGypBuild = require('node-gyp-build') as ((d: string) => unknown) & { path(d: string): string };
    expect(nodeGypBuild.path(dir)).toMatch(/\.node$/);
    const native = nodeGypBuild(dir) as { mask: (s: Buffer, m: Buffer, o: Buffer, off: number, len: number) => void };
    const out = Buffer.alloc(4);
    native.mask(Buffer.from([1, 2, 3, 4]), Buffer.from([0xff, 0xff, 0xff, 0xff]), out, 0, 4);
    expect([...out]).toEqual([0xfe, 0xfd, 0xfc, 0xfb]);
  });

  it('runs a command in a pseudo-terminal through node-pty', async () => {
    const pty = (await import('node-pty')).default;
    const term = pty.spawn('/bin/sh', ['-c', 'test -t 0 && echo tty-$((6*7))'], { cols: 80, rows: 24 });
    let out = '';
    term.onData((d) => (out += d));
    const code = await new Promise<number>((done) => term.onExit((e) => done(e.exitCode)));
    expect(code).toBe(0);
    expect(out).toContain('tty-42');
  });
});
