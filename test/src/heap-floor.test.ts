/**
 * The heap floor (src/heap-floor.ts): which commands relaunch with `--initial-old-space-size`, how
 * (execve, or one child process where Node has no `process.execve`), how the flag is spelled into the
 * new argv, the `KSP_HEAP_FLOOR_MB` override, how a process says where its floor came from, and the
 * CLI doing it for real: the process that relays `serve` or `agent` has the flag in /proc/PID/cmdline
 * (the started process itself on Node ≥ 22.15, its one child on Node 20), logs `heap floor` with how it
 * got it, and shows it in `/metrics`. Signals and exit status through the child:
 * heap-floor-child.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DEFAULT_HEAP_FLOOR_MB,
  HEAP_FLOOR_ENV,
  HEAP_FLOOR_FLAG,
  HEAP_FLOOR_VIA_ENV,
  heapFloorMb,
  heapFloorRelaunch,
  heapFloorStatus,
  heapSizeFlagMb,
  type HeapFloorInput,
  type HeapFloorStatusInput,
} from '../../src/heap-floor.js';
import { CLI, ROOT, SERVE_ARGS, canExecve, childPids, cmdline, heapFloorLine, heapFloorMetric, relayingPid, startCli } from './heap-floor-fixture.js';

const input = (over: Partial<HeapFloorInput> = {}): HeapFloorInput => ({
  argv: ['/usr/bin/node', '/app/bin/kube-stream-proxy.js', 'serve', '--listen', '127.0.0.1:0'],
  execArgv: [],
  execPath: '/usr/bin/node',
  env: {},
  canExecve: true,
  pid: 4242,
  ...over,
});

describe('heapFloorRelaunch', () => {
  it('re-executes serve with the floor before the script, keeping node flags, arguments and environment', () => {
    const plan = heapFloorRelaunch(input({ execArgv: ['--import', 'x.js', '--cpu-prof'], env: { HOME: '/root' } }));
    expect(plan).toEqual({
      how: 'execve',
      file: '/usr/bin/node',
      args: ['/usr/bin/node', '--import', 'x.js', '--cpu-prof', `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`, '/app/bin/kube-stream-proxy.js', 'serve', '--listen', '127.0.0.1:0'],
      env: { HOME: '/root', [HEAP_FLOOR_VIA_ENV]: 'execve:4242' },
      floorMb: 128,
    });
  });

  it('starts the same command line as one child process where Node cannot replace its process image', () => {
    const plan = heapFloorRelaunch(input({ canExecve: false, env: { HOME: '/root' } }));
    expect(plan).toEqual({
      how: 'child-process',
      file: '/usr/bin/node',
      args: ['/usr/bin/node', `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`, '/app/bin/kube-stream-proxy.js', 'serve', '--listen', '127.0.0.1:0'],
      env: { HOME: '/root', [HEAP_FLOOR_VIA_ENV]: 'child-process:4242' },
      floorMb: 128,
    });
  });

  it('covers the relaying commands only', () => {
    for (const canExecve of [true, false]) {
      for (const command of ['serve', 'agent', 'demo']) {
        expect(heapFloorRelaunch(input({ canExecve, argv: ['/usr/bin/node', '/app/bin/k.js', command] }))?.args.at(-1), command).toBe(command);
      }
      for (const argv of [
        ['/usr/bin/node', '/app/bin/k.js'],
        ['/usr/bin/node', '/app/bin/k.js', 'dev-cluster', '--listen', ':0'],
        ['/usr/bin/node', '/app/bin/k.js', 'dev-metrics'],
        ['/usr/bin/node', '/app/bin/k.js', '--help'],
        ['/usr/bin/node', '/app/bin/k.js', 'serve', '--help'],
        ['/usr/bin/node', '/app/bin/k.js', 'agent', '-h'],
      ]) {
        expect(heapFloorRelaunch(input({ canExecve, argv })), argv.join(' ')).toBeUndefined();
      }
    }
  });

  it('leaves a command line alone that already sizes the heap (no loop after the relaunch, execve or child)', () => {
    for (const flag of ['--initial-old-space-size=64', '--initial_old_space_size=64', '--initial-heap-size=512']) {
      expect(heapFloorRelaunch(input({ execArgv: [flag] })), flag).toBeUndefined();
      expect(heapFloorRelaunch(input({ execArgv: [flag], canExecve: false })), flag).toBeUndefined();
    }
    for (const canExecve of [true, false]) {
      const once = heapFloorRelaunch(input({ canExecve }))!;
      const [, ...again] = once.args; // what process.execArgv and process.argv are in the relaunched process
      const flagAt = again.findIndex((a) => a.startsWith(HEAP_FLOOR_FLAG));
      expect(heapFloorRelaunch(input({ canExecve, env: once.env, argv: [once.file, ...again.slice(flagAt + 1)], execArgv: again.slice(0, flagAt + 1) }))).toBeUndefined();
    }
    // --max-old-space-size is a ceiling, not a floor: the floor is still added.
    expect(heapFloorRelaunch(input({ execArgv: ['--max-old-space-size=4096'] }))?.args).toContain(`${HEAP_FLOOR_FLAG}=128`);
  });

  it('takes the floor from KSP_HEAP_FLOOR_MB; 0 turns it off; anything else is an error', () => {
    for (const canExecve of [true, false]) {
      expect(heapFloorRelaunch(input({ canExecve, env: { [HEAP_FLOOR_ENV]: '256' } }))?.args).toContain(`${HEAP_FLOOR_FLAG}=256`);
      expect(heapFloorRelaunch(input({ canExecve, env: { [HEAP_FLOOR_ENV]: '0' } }))).toBeUndefined();
    }
    expect(heapFloorMb({ [HEAP_FLOOR_ENV]: '' })).toBe(DEFAULT_HEAP_FLOOR_MB);
    for (const bad of ['-1', '1.5', '128m', 'off']) {
      expect(() => heapFloorMb({ [HEAP_FLOOR_ENV]: bad }), bad).toThrow(`${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "${bad}"`);
    }
  });
});

describe('heapFloorStatus', () => {
  const status = (over: Partial<HeapFloorStatusInput> = {}) =>
    heapFloorStatus({ argv: ['/usr/bin/node', '/app/bin/k.js', 'serve'], execArgv: [], env: {}, pid: 20, ppid: 10, ...over });
  const floor = `${HEAP_FLOOR_FLAG}=128`;

  it('says how the floor got there: execve, the child process, or node flags given by whoever started it', () => {
    expect(status({ execArgv: [floor], env: { [HEAP_FLOOR_VIA_ENV]: 'execve:20' } })).toEqual({ floorMb: 128, via: 'execve' });
    expect(status({ execArgv: [floor], env: { [HEAP_FLOOR_VIA_ENV]: 'child-process:10' } })).toEqual({ floorMb: 128, via: 'child-process' });
    expect(status({ execArgv: [floor] })).toEqual({ floorMb: 128, via: 'command-line' });
    // A marker that is not about this process (another pid: inherited, or the parent is gone).
    expect(status({ execArgv: [floor], env: { [HEAP_FLOOR_VIA_ENV]: 'execve:21' } })).toEqual({ floorMb: 128, via: 'command-line' });
    expect(status({ execArgv: [floor], env: { [HEAP_FLOOR_VIA_ENV]: 'child-process:11' } })).toEqual({ floorMb: 128, via: 'command-line' });
    // Node flags win over KSP_HEAP_FLOOR_MB=0, as for the relaunch; any command that was given them.
    expect(status({ execArgv: ['--initial-old-space-size=256'], env: { [HEAP_FLOOR_ENV]: '0' } })).toEqual({ floorMb: 256, via: 'command-line' });
    expect(status({ execArgv: ['--initial-heap-size', '512'], argv: ['/usr/bin/node', '/app/bin/k.js', 'dev-cluster'] })).toEqual({ floorMb: 512, via: 'command-line' });
  });

  it('says why it is off: KSP_HEAP_FLOOR_MB=0, a command that does not relay, or no relaunch by the CLI', () => {
    expect(status({ env: { [HEAP_FLOOR_ENV]: '0' } })).toEqual({ floorMb: 0, via: 'env' });
    expect(status({ argv: ['/usr/bin/node', '/app/bin/k.js', 'dev-cluster'] })).toEqual({ floorMb: 0, via: 'not-relaying' });
    expect(status({ argv: ['/usr/bin/node', '/app/bin/k.js', 'serve', '--help'] })).toEqual({ floorMb: 0, via: 'not-relaying' });
    const unknownCommand = { execArgv: [], env: {}, pid: 20, ppid: 10 };
    expect(heapFloorStatus(unknownCommand)).toEqual({ floorMb: 0, via: 'not-relaunched' });
    expect(heapFloorStatus({ ...unknownCommand, env: { [HEAP_FLOOR_ENV]: 'lots' } })).toEqual({ floorMb: 0, via: 'not-relaunched' });
  });

  it('reads the MiB of the last heap-size flag, in either spelling', () => {
    expect(heapSizeFlagMb([])).toBeUndefined();
    expect(heapSizeFlagMb(['--max-old-space-size=4096'])).toBeUndefined();
    expect(heapSizeFlagMb(['--initial-old-space-size=64', '--initial_old_space_size=96'])).toBe(96);
    expect(heapSizeFlagMb(['--initial-old-space-size', '200', '--cpu-prof'])).toBe(200);
    expect(heapSizeFlagMb(['--initial-old-space-size=lots'])).toBe(0);
  });
});

describe('the CLI', () => {
  const floor = `${HEAP_FLOOR_FLAG}=${DEFAULT_HEAP_FLOOR_MB}`;
  const expectedVia = canExecve ? 'execve' : 'child-process';

  it(`serve: the process that relays has the floor on its command line (${canExecve ? 'the same process, re-executed' : 'the one child of the started process'}), says how it got it, and /metrics shows it`, async () => {
    const p = startCli(SERVE_ARGS);
    try {
      const url = (await p.waitFor(/kube-stream-proxy listening on (\S+),/))[1]!;
      const relaying = relayingPid(p, true);
      expect(cmdline(relaying)).toEqual([process.execPath, floor, CLI, ...SERVE_ARGS]);
      if (!canExecve) {
        expect(relaying).not.toBe(p.child.pid);
        expect(cmdline(p.child.pid!)).toEqual([process.execPath, CLI, ...SERVE_ARGS]);
      }
      // No loop: the relaying process starts nothing.
      expect(childPids(relaying)).toEqual([]);
      expect(await heapFloorLine(p)).toMatchObject({ heapFloorMb: 128, via: expectedVia, pid: relaying });
      expect(await heapFloorMetric(url)).toBe(134_217_728);
      // It was started with the marker that says so (environ: the environment it was started with;
      // it removes the marker at start, heap-floor-child.test.ts checks a pod's environment).
      expect(readFileSync(`/proc/${relaying}/environ`, 'utf8').split('\0')).toContain(`${HEAP_FLOOR_VIA_ENV}=${expectedVia}:${canExecve ? relaying : p.child.pid}`);
    } finally {
      await p.stop();
    }
  });

  it('agent: the process that relays has the floor and logs how it got it', async () => {
    const work = mkdtempSync(join(tmpdir(), 'ksp-heap-floor-'));
    writeFileSync(join(work, 'token'), 'not-a-real-token\n');
    const args = ['agent', '--proxy-url', 'http://127.0.0.1:1', '--cluster-name', 'one', '--token-file', join(work, 'token'), '--upstream', 'http://127.0.0.1:1'];
    const p = startCli(args);
    try {
      const line = await heapFloorLine(p);
      const relaying = relayingPid(p, true);
      expect(cmdline(relaying)).toEqual([process.execPath, floor, CLI, ...args]);
      expect(line).toMatchObject({ heapFloorMb: 128, via: expectedVia });
    } finally {
      await p.stop();
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('KSP_HEAP_FLOOR_MB=0: no relaunch, no child; the log and /metrics say off', async () => {
    const p = startCli(SERVE_ARGS, { env: { [HEAP_FLOOR_ENV]: '0' } });
    try {
      const url = (await p.waitFor(/kube-stream-proxy listening on (\S+),/))[1]!;
      expect(relayingPid(p, false)).toBe(p.child.pid);
      expect(cmdline(p.child.pid!)).toEqual([process.execPath, CLI, ...SERVE_ARGS]);
      expect(await heapFloorLine(p)).toMatchObject({ heapFloorMb: 0, via: 'env' });
      expect(await heapFloorMetric(url)).toBe(0);
    } finally {
      await p.stop();
    }
  });

  it('a floor given on node\'s command line: no relaunch, no child; its size in the log and /metrics', async () => {
    const p = startCli(SERVE_ARGS, { nodeArgs: [`${HEAP_FLOOR_FLAG}=256`] });
    try {
      const url = (await p.waitFor(/kube-stream-proxy listening on (\S+),/))[1]!;
      expect(relayingPid(p, false)).toBe(p.child.pid);
      expect(await heapFloorLine(p)).toMatchObject({ heapFloorMb: 256, via: 'command-line' });
      expect(await heapFloorMetric(url)).toBe(268_435_456);
    } finally {
      await p.stop();
    }
  });

  it('a bad KSP_HEAP_FLOOR_MB is a clear error and exit status 2, before anything starts', () => {
    const r = spawnSync(process.execPath, [CLI, 'serve', '--listen', '127.0.0.1:0'], { env: { ...process.env, [HEAP_FLOOR_ENV]: 'lots' }, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`kube-stream-proxy: ${HEAP_FLOOR_ENV} must be a whole number of MiB (0 turns the heap floor off), got "lots"\n`);
    expect(r.stdout).toBe('');
  });

  it('npm start gives the floor on node\'s command line (no relaunch needed on any Node)', () => {
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
    // The "heap floor from the CLI" row starts the proxy as a user does: the CLI relaunches itself.
    expect(withHeapFloor('serve', { cliHeapFloor: true }).nodeArgs).toBeUndefined();
  });

  it('has a CPU row that starts the proxy as a user does, next to the bench-given floor and no floor', async () => {
    const { CPU_RELAYS } = await import('../../bench/cpu.js');
    const keys = CPU_RELAYS.map((r) => r.key);
    expect(keys).toEqual(expect.arrayContaining(['translation', 'translation-nofloor', 'translation-cli-floor']));
    // Not wrapped or profiled: valgrind and --cpu-prof would follow the first process, not its child.
    expect(CPU_RELAYS.find((r) => r.key === 'translation-cli-floor')!.node).toBe(false);
  });
});
