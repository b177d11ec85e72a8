/**
 * The heap floor's child process (src/heap-floor-child.ts) and the CLI that uses it on Node 20:
 * - the parent on its own (any child command, so on every runtime): exit code, death by the same
 *   signal or 128 + N, SIGTERM / SIGINT / SIGHUP passed on once each, the child in a process group of
 *   its own, and a parent killed with SIGKILL taking its child along;
 * - the real CLI (`serve`, `demo`): whatever the runtime does (execve on Node ≥ 22.15, the child on
 *   Node 20), the started process ends as the process that relays ends, and SIGTERM to it drains as
 *   before: new connections refused, the running `kubectl exec` finishes within the grace period.
 * Needs `npm run build` (the CLI and the parent driver load dist/).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { HEAP_FLOOR_FLAG, type HeapFloorRelaunch } from '../../src/heap-floor.js';
import { startDemo, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl } from '../helpers/kubectl.js';
import { CLI, ROOT, SERVE_ARGS, canExecve, cmdline, isRunning, relayingPid, startCli, until, type CliProcess } from './heap-floor-fixture.js';

const CHILD_MODULE = pathToFileURL(join(ROOT, 'dist/src/heap-floor-child.js')).href;

/** `runHeapFloorParent(plan)` in a process of its own: node -e DRIVER PLAN_JSON. */
const DRIVER = `import { runHeapFloorParent } from ${JSON.stringify(CHILD_MODULE)};
runHeapFloorParent(JSON.parse(process.argv[1]));`;

/** Run the parent for a child `node -e SCRIPT` (or another command line), collecting the output. */
function startParent(childArgs: string[], o: { detached?: boolean } = {}): CliProcess {
  const plan: HeapFloorRelaunch = { how: 'child-process', file: childArgs[0]!, args: childArgs, env: { ...process.env }, floorMb: 128 };
  const child = spawn(process.execPath, ['--input-type=module', '-e', DRIVER, JSON.stringify(plan)], { stdio: ['ignore', 'pipe', 'pipe'], detached: o.detached ?? false });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (c: Buffer): void => {
    out += c.toString('utf8');
    listeners.forEach((l) => l());
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  return {
    child,
    output: () => out,
    exited,
    waitFor: (re, timeoutMs = 20_000) =>
      new Promise((resolveMatch, reject) => {
        const timer = setTimeout(() => done(new Error(`no ${re} within ${timeoutMs} ms:\n${out}`)), timeoutMs);
        const check = (): void => {
          const m = re.exec(out);
          if (m) done(undefined, m);
        };
        function done(err?: Error, m?: RegExpExecArray): void {
          clearTimeout(timer);
          listeners.delete(check);
          if (err) reject(err);
          else resolveMatch(m!);
        }
        listeners.add(check);
        void exited.then(({ code, signal }) => done(new Error(`exited (code ${code}, signal ${signal}) before ${re}:\n${out}`)));
        check();
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

const nodeChild = (script: string): string[] => [process.execPath, '--input-type=module', '-e', script];

/** A child that reports each forwarded signal and exits 5 on SIGHUP. */
const REPORTER = `for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(s, () => { process.stdout.write('got ' + s + '\\n'); if (s === 'SIGHUP') process.exit(5); });
process.stdout.write('ready ' + process.pid + '\\n');
setInterval(() => {}, 1 << 30);`;

/** The process group of `pid` (field 5 of /proc/PID/stat). */
function pgrp(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

describe('runHeapFloorParent', () => {
  let parent: CliProcess | undefined;
  afterEach(async () => {
    await parent?.stop();
    parent = undefined;
  });

  it("ends with the child's exit code", async () => {
    parent = startParent(['/bin/sh', '-c', 'echo from the child; exit 7']);
    expect(await parent.exited).toEqual({ code: 7, signal: null });
    expect(parent.output()).toBe('from the child\n');
  });

  it('dies of the signal that killed the child; exits 128 + N for one that would dump core', async () => {
    parent = startParent(['/bin/sh', '-c', 'kill -TERM $$']);
    expect(await parent.exited).toEqual({ code: null, signal: 'SIGTERM' });
    parent = startParent(['/bin/sh', '-c', 'kill -KILL $$']);
    expect(await parent.exited).toEqual({ code: null, signal: 'SIGKILL' });
    parent = startParent(['/bin/sh', '-c', 'ulimit -c 0; kill -QUIT $$']);
    expect(await parent.exited).toEqual({ code: 128 + 3, signal: null });
  });

  it('passes SIGTERM, SIGINT and SIGHUP on to the child, once each', async () => {
    parent = startParent(nodeChild(REPORTER));
    await parent.waitFor(/^ready \d+\n/);
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      parent.child.kill(signal);
      await parent.waitFor(new RegExp(`^got ${signal}\\n`, 'm'));
    }
    parent.child.kill('SIGHUP');
    expect(await parent.exited).toEqual({ code: 5, signal: null });
    expect(parent.output()).toMatch(/^ready \d+\ngot SIGTERM\ngot SIGINT\ngot SIGHUP\n$/);
  });

  it("runs the child in a process group of its own: a signal to the parent's group (Ctrl-C) reaches it once", async () => {
    parent = startParent(nodeChild(REPORTER), { detached: true });
    const childPid = Number((await parent.waitFor(/^ready (\d+)\n/))[1]);
    expect(pgrp(childPid)).toBe(childPid);
    expect(pgrp(parent.child.pid!)).toBe(parent.child.pid);
    process.kill(-parent.child.pid!, 'SIGINT'); // what a terminal does with Ctrl-C: the whole foreground group
    await parent.waitFor(/^got SIGINT\n/m);
    parent.child.kill('SIGHUP');
    expect(await parent.exited).toEqual({ code: 5, signal: null });
    expect(parent.output()).toMatch(/^ready \d+\ngot SIGINT\ngot SIGHUP\n$/);
  });

  it('a parent killed with SIGKILL takes its child along (the child watches the pipe from it)', async () => {
    const watcher = `import { watchHeapFloorParent } from ${JSON.stringify(CHILD_MODULE)};
watchHeapFloorParent();
process.stdout.write('ready ' + process.pid + '\\n');
setInterval(() => {}, 1 << 30);`;
    parent = startParent(nodeChild(watcher));
    const childPid = Number((await parent.waitFor(/^ready (\d+)\n/))[1]);
    expect(isRunning(childPid)).toBe(true);
    parent.child.kill('SIGKILL');
    await parent.exited;
    await until(() => !isRunning(childPid), `child ${childPid} gone after its parent's SIGKILL`);
  });
});

describe(`the CLI's process that relays (${canExecve ? 'the started process itself, re-executed' : 'the one child of the started process'})`, () => {
  let p: CliProcess | undefined;
  afterEach(async () => {
    await p?.stop();
    p = undefined;
  });

  const started = async (args = SERVE_ARGS, o: { detached?: boolean } = {}): Promise<{ cli: CliProcess; relaying: number }> => {
    p = startCli(args, o);
    const url = (await p.waitFor(/kube-stream-proxy listening on (\S+),/))[1]!;
    // serve prints that line just before it installs its SIGTERM/SIGINT handlers (src/cli.ts); an
    // answer means the event loop has turned since, so they are there.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const relaying = relayingPid(p, true);
    expect(cmdline(relaying)).toContain(`${HEAP_FLOOR_FLAG}=128`);
    return { cli: p, relaying };
  };

  it('exits non-zero: the CLI exits with its code (a bad flag: 2; a port in use: 1)', async () => {
    p = startCli(['serve', '--no-such-flag']);
    expect(await p.exited).toEqual({ code: 2, signal: null });
    expect(p.output()).toContain("kube-stream-proxy serve: Unknown option '--no-such-flag'");
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      p = startCli(['serve', '--listen', `127.0.0.1:${(taken.address() as AddressInfo).port}`, '--upstream', 'http://127.0.0.1:1']);
      expect(await p.exited).toEqual({ code: 1, signal: null });
      expect(p.output()).toMatch(/^kube-stream-proxy: listen EADDRINUSE/m);
    } finally {
      taken.close();
    }
  });

  it('killed by a signal: the CLI dies of the same signal (SIGHUP passed on; SIGKILL to the relaying process)', async () => {
    let { cli, relaying } = await started();
    cli.child.kill('SIGHUP');
    expect(await cli.exited).toEqual({ code: null, signal: 'SIGHUP' });
    expect(isRunning(relaying)).toBe(false);
    ({ cli, relaying } = await started());
    process.kill(relaying, 'SIGKILL');
    expect(await cli.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('the CLI killed with SIGKILL: the relaying process does not outlive it', async () => {
    const { cli, relaying } = await started();
    cli.child.kill('SIGKILL');
    await cli.exited;
    await until(() => !isRunning(relaying), `relaying process ${relaying} gone`);
  });

  it("Ctrl-C (SIGINT to the CLI's process group) shuts down once, gracefully: exit 0, no 'again'", async () => {
    const { cli } = await started(SERVE_ARGS, { detached: true });
    process.kill(-cli.child.pid!, 'SIGINT');
    expect(await cli.exited, cli.output()).toEqual({ code: 0, signal: null });
    expect(cli.output().match(/SIGINT, shutting down/g)).toHaveLength(1);
    expect(cli.output()).not.toContain('again');
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('SIGTERM to the CLI of a demo (kubectl 1.33)', () => {
  let work: string | undefined;
  let demo: DemoProcess | undefined;
  afterEach(async () => {
    await demo?.stop();
    demo = undefined;
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("drains as before: new connections refused, the running session finishes, exit 0; pods do not see the CLI's marker", async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-heap-floor-'));
    demo = await startDemo(work, ['--listen', '127.0.0.1:0', '--kubeconfig', join(work, 'kubeconfig'), '--shutdown-grace-period', '20s']);
    const d = demo;
    const floorLine = new RegExp(`"heapFloorMb":128,"via":"${canExecve ? 'execve' : 'child-process'}","msg":"heap floor"`);
    await until(() => floorLine.test(d.output()), 'the heap floor log line');
    const script = 'echo started; env | grep -c KSP_HEAP_FLOOR_VIA; read line; echo done';
    const stdin = new PassThrough();
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', '-i', 'demo', '--', 'sh', '-c', script], { kubeconfig: d.kubeconfig, env: {}, stdin });
    try {
      await kubectl.waitForOutput(/started\n0\n/, 30_000);
      d.child.kill('SIGTERM');
      await until(() => /"sessions":1,"graceMs":20000,"msg":"shutting down/.test(d.output()), 'the drain log line');
      // Draining: the listener is closed, so a readiness probe fails; the session is still running.
      const refused = await new Promise<string>((r) => connect(Number(d.proxyUrl.port), '127.0.0.1').on('connect', () => r('connected')).on('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error')));
      expect(refused).toBe('ECONNREFUSED');
      expect(kubectl.child.exitCode).toBeNull();
      stdin.end('go on\n');
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit, JSON.stringify(kubectl.output())).toEqual({ code: 0, signal: null, killed: false });
      expect(kubectl.output().stdout).toBe('started\n0\ndone\n');
      expect(await d.exit, d.output()).toBe(0);
      expect(d.output().match(/SIGTERM, shutting down/g)).toHaveLength(1);
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });
});
