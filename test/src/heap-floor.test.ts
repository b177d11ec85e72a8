/**
 * The heap floor (src/heap-floor.ts): which commands re-execute with `--initial-old-space-size`, how
 * the flag is spelled into the new argv, the `KSP_HEAP_FLOOR_MB` override, and the CLI doing it for
 * real: on a Node with `process.execve` the running `serve` process's own command line (/proc) carries
 * the flag, same process id; on one without, the command line is left as it was.
 */
import { describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_HEAP_FLOOR_MB, HEAP_FLOOR_ENV, HEAP_FLOOR_FLAG, heapFloorMb, heapFloorRelaunch, type HeapFloorInput } from '../../src/heap-floor.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

const input = (over: Partial<HeapFloorInput> = {}): HeapFloorInput => ({
  argv: ['/usr/bin/node', '/app/bin/kube-stream-proxy.js', 'serve', '--listen', '127.0.0.1:0'],
  execArgv: [],
  execPath: '/usr/bin/node',
  env: {},
  canExecve: true,
  ...over,
});

describe('heapFloorRelaunch', () => {
  it('re-executes serve with the floor before the script, keeping node flags and arguments in order', () => {
    const plan = heapFloorRelaunch(input({ execArgv: ['--import', 'x.js', '--cpu-prof'] }));
    expect(plan).toEqual({
      file: '/usr/bin/node',
      args: ['/usr/bin/node', '--import', 'x.js', '--cpu-prof', `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`, '/app/bin/kube-stream-proxy.js', 'serve', '--listen', '127.0.0.1:0'],
      floorMb: 128,
    });
  });

  it('covers the relaying commands only', () => {
    for (const command of ['serve', 'agent', 'demo']) {
      expect(heapFloorRelaunch(input({ argv: ['/usr/bin/node', '/app/bin/k.js', command] }))?.args.at(-1), command).toBe(command);
    }
    for (const argv of [
      ['/usr/bin/node', '/app/bin/k.js'],
      ['/usr/bin/node', '/app/bin/k.js', 'dev-cluster', '--listen', ':0'],
      ['/usr/bin/node', '/app/bin/k.js', 'dev-metrics'],
      ['/usr/bin/node', '/app/bin/k.js', '--help'],
      ['/usr/bin/node', '/app/bin/k.js', 'serve', '--help'],
      ['/usr/bin/node', '/app/bin/k.js', 'agent', '-h'],
    ]) {
      expect(heapFloorRelaunch(input({ argv })), argv.join(' ')).toBeUndefined();
    }
  });

  it('leaves a command line alone that already sizes the heap (no loop after the re-execution)', () => {
    for (const flag of ['--initial-old-space-size=64', '--initial_old_space_size=64', '--initial-heap-size=512']) {
      expect(heapFloorRelaunch(input({ execArgv: [flag] })), flag).toBeUndefined();
    }
    const once = heapFloorRelaunch(input())!;
    const [, ...again] = once.args; // what process.execArgv and process.argv become after execve
    const flagAt = again.findIndex((a) => a.startsWith(HEAP_FLOOR_FLAG));
    expect(heapFloorRelaunch(input({ argv: [once.file, ...again.slice(flagAt + 1)], execArgv: again.slice(0, flagAt + 1) }))).toBeUndefined();
    // --max-old-space-size is a ceiling, not a floor: the floor is still added.
    expect(heapFloorRelaunch(input({ execArgv: ['--max-old-space-size=4096'] }))?.args).toContain(`${HEAP_FLOOR_FLAG}=128`);
  });

  it('takes the floor from KSP_HEAP_FLOOR_MB; 0 turns it off; anything else is an error', () => {
    expect(heapFloorRelaunch(input({ env: { [HEAP_FLOOR_ENV]: '256' } }))?.args).toContain(`${HEAP_FLOOR_FLAG}=256`);
    expect(heapFloorRelaunch(input({ env: { [HEAP_FLOOR_ENV]: '0' } }))).toBeUndefined();
    expect(heapFloorMb({ [HEAP_FLOOR_ENV]: '' })).toBe(DEFAULT_HEAP_FLOOR_MB);
    for (const bad of ['-1', '1.5', '128m', 'off']) {
      expect(() => heapFloorMb({ [HEAP_FLOOR_ENV]: bad }), bad).toThrow(`${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "${bad}"`);
    }
  });

  it('does nothing where Node cannot replace its process image', () => {
    expect(heapFloorRelaunch(input({ canExecve: false }))).toBeUndefined();
  });
});

/** Start `serve` through the CLI, read its command line from /proc once it listens, stop it. */
async function serveCommandLine(env: Record<string, string>): Promise<{ pid: number; cmdline: string[] }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--listen', '127.0.0.1:0', '--upstream', 'http://127.0.0.1:1'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  try {
    await new Promise<void>((ready, fail) => {
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (/kube-stream-proxy listening on /.test(out)) ready();
      });
      child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      child.once('exit', (code) => fail(new Error(`serve exited early (${code}):\n${out}`)));
    });
    return { pid: child.pid!, cmdline: readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter((a) => a.length > 0) };
  } finally {
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGTERM');
    await exited;
  }
}

describe('the CLI', () => {
  const canExecve = typeof (process as { execve?: unknown }).execve === 'function';

  it(`${canExecve ? 're-executes' : 'cannot re-execute (no process.execve on this Node)'}: serve's own command line`, async () => {
    const { cmdline } = await serveCommandLine({});
    const floor = `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`;
    if (canExecve) {
      // Same process (the pid spawn returned), now node --initial-old-space-size=128 <script> serve …
      expect(cmdline.slice(0, 2)).toEqual([process.execPath, floor]);
      expect(cmdline.slice(2)).toEqual([CLI, 'serve', '--listen', '127.0.0.1:0', '--upstream', 'http://127.0.0.1:1']);
    } else {
      expect(cmdline).not.toContain(floor);
      expect(cmdline.slice(1)).toEqual([CLI, 'serve', '--listen', '127.0.0.1:0', '--upstream', 'http://127.0.0.1:1']);
    }
  });

  it('KSP_HEAP_FLOOR_MB=0 keeps the command line as started', async () => {
    const { cmdline } = await serveCommandLine({ [HEAP_FLOOR_ENV]: '0' });
    expect(cmdline.some((a) => a.startsWith(HEAP_FLOOR_FLAG))).toBe(false);
  });

  it('a bad KSP_HEAP_FLOOR_MB is a clear error and exit status 2, before anything starts', () => {
    const r = spawnSync(process.execPath, [CLI, 'serve', '--listen', '127.0.0.1:0'], { env: { ...process.env, [HEAP_FLOOR_ENV]: 'lots' }, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`kube-stream-proxy: ${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "lots"\n`);
    expect(r.stdout).toBe('');
  });

  it('npm start gives the floor on node\'s command line (Node 20 has no process.execve)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(`node ${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB} bin/kube-stream-proxy.js demo`);
  });
});

describe('the bench (bench/servers.ts withHeapFloor)', () => {
  it('starts the relaying commands with the floor on node\'s command line, as npm start does', async () => {
    const { withHeapFloor } = await import('../../bench/servers.js');
    const floor = `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`;
    expect(withHeapFloor('serve', {}).nodeArgs).toEqual([floor]);
    expect(withHeapFloor('agent', { nodeArgs: ['--cpu-prof'] }).nodeArgs).toEqual(['--cpu-prof', floor]);
    expect(withHeapFloor('dev-cluster', {}).nodeArgs).toBeUndefined();
    // The "no heap floor" rows, and a caller's own floor, are left alone.
    expect(withHeapFloor('serve', { env: { [HEAP_FLOOR_ENV]: '0' } }).nodeArgs).toBeUndefined();
    expect(withHeapFloor('serve', { nodeArgs: [`${HEAP_FLOOR_FLAG}=512`] }).nodeArgs).toEqual([`${HEAP_FLOOR_FLAG}=512`]);
  });
});
