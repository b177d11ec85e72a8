import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PodRegistry } from '../../../dev/cluster/pod-registry.js';
import type { ProcessStat } from '../../../dev/cluster/proc-stats.js';
import { assignProcesses, ResourceMetricsCollector } from '../../../dev/cluster/resource-metrics.js';

function stat(pid: number, ppid: number, pgrp: number, ownTicks = 0, childTicks = 0): ProcessStat {
  return { pid, ppid, pgrp, state: 'S', ownTicks, childTicks, startTicks: pid * 10 };
}

describe('assignProcesses', () => {
  it('gives a process to its root, its group leader root, or its nearest root ancestor', () => {
    const stats = new Map(
      [
        stat(1, 0, 1),
        stat(100, 50, 100), // root A (started by the dev cluster, pid 50)
        stat(101, 100, 100), // A's child
        stat(102, 1, 100), // A's orphan, reparented to init, still in A's group
        stat(103, 101, 103), // A's grandchild in a group of its own
        stat(300, 60, 300), // root B
        stat(301, 300, 300),
        stat(200, 1, 200), // unrelated
        stat(50, 1, 50), // the dev cluster itself
      ].map((s) => [s.pid, s]),
    );
    const owners = assignProcesses(new Map([[100, 'A'], [300, 'B']]), stats);
    expect(Object.fromEntries(owners)).toEqual({ 100: 'A', 101: 'A', 102: 'A', 103: 'A', 300: 'B', 301: 'B' });
  });
  it('keeps a former member that left its group and was reparented, if it is the same process', () => {
    const stats = new Map([stat(1, 0, 1), stat(100, 50, 100), stat(104, 1, 104), stat(105, 104, 104)].map((s) => [s.pid, s]));
    const roots = new Map([[100, 'A']]);
    expect(assignProcesses(roots, stats).has(104)).toBe(false);
    const owners = assignProcesses(roots, stats, new Map([[104, { key: 'A', startTicks: 1040 }]]));
    expect(Object.fromEntries(owners)).toEqual({ 100: 'A', 104: 'A', 105: 'A' });
    // A new process that reused the pid (another start time) is not the member.
    expect(assignProcesses(roots, stats, new Map([[104, { key: 'A', startTicks: 1 }]])).has(104)).toBe(false);
  });
  it('survives a ppid cycle', () => {
    const stats = new Map([stat(5, 6, 5), stat(6, 5, 6)].map((s) => [s.pid, s]));
    expect(assignProcesses(new Map(), stats).size).toBe(0);
  });
});

describe('ResourceMetricsCollector over a fake /proc', () => {
  let proc: string;
  let now = 1_000_000;
  beforeEach(() => {
    proc = mkdtempSync(join(tmpdir(), 'fake-proc-'));
    writeFileSync(join(proc, 'stat'), 'cpu  1000 0 500 90000 0 0 0 0 0 0\n');
    writeFileSync(join(proc, 'meminfo'), 'MemTotal: 4000 kB\nMemAvailable: 1000 kB\n');
  });
  afterEach(() => rmSync(proc, { recursive: true, force: true }));

  const writeProc = (s: ProcessStat, rssKb = 100): void => {
    mkdirSync(join(proc, String(s.pid)), { recursive: true });
    const f = Array(52).fill('0');
    // fields 3.. : state ppid pgrp … utime(14) stime(15) cutime(16) cstime(17) … starttime(22)
    f[3] = s.state;
    f[4] = String(s.ppid);
    f[5] = String(s.pgrp);
    f[14] = String(s.ownTicks);
    f[16] = String(s.childTicks);
    f[22] = String(s.startTicks);
    writeFileSync(join(proc, String(s.pid), 'stat'), `${s.pid} (sh) ${f.slice(3).join(' ')}\n`);
    writeFileSync(join(proc, String(s.pid), 'status'), `Name:\tsh\nVmRSS:\t${rssKb} kB\n`);
  };
  const gone = (pid: number): void => rmSync(join(proc, String(pid)), { recursive: true, force: true });

  const main = { pid: 100 as number | undefined, startedAt: '2026-01-01T00:00:00.000Z' };
  const execProcess = { pid: 300 as number | undefined };
  const pod = {
    uid: 'u1',
    namespace: 'default',
    name: 'web',
    deleted: false,
    creationTimestamp: '2026-01-01T00:00:00Z',
    containers: [{ name: 'app' }],
    mains: new Map([['app', main]]),
    execs: new Set([{ container: 'app', process: execProcess }]),
  };
  const registry = { list: () => [pod] } as unknown as PodRegistry;
  const collector = (): ResourceMetricsCollector =>
    new ResourceMetricsCollector(registry, { procRoot: proc, clockTicksPerSecond: 100, now: () => now });

  it('sums the members, keeps the time of exited processes once, and never goes down', async () => {
    const c = collector();
    writeProc(stat(100, 50, 100, 100), 1000); // main: 1 s
    writeProc(stat(101, 100, 100, 50), 500); // its child: 0.5 s
    writeProc(stat(300, 60, 300, 200), 300); // exec'd: 2 s
    writeProc(stat(200, 1, 200, 9999), 9999); // not the pod's
    let s = await c.collect();
    expect(s.timestampMs).toBe(now);
    expect(s.containers).toEqual([
      { namespace: 'default', pod: 'web', container: 'app', startTimeSeconds: Date.parse(main.startedAt) / 1000, cpuSeconds: 3.5, memoryBytes: 1800 * 1024 },
    ]);
    expect(s.pods).toEqual([{ namespace: 'default', pod: 'web', cpuSeconds: 3.5, memoryBytes: 1800 * 1024 }]);
    expect(s.node).toEqual({ cpuSeconds: 15, memoryBytes: 3000 * 1024 });

    // The child exits and the main process reaps it: its 0.5 s moves into the main's cutime.
    gone(101);
    writeProc(stat(100, 50, 100, 110, 50), 1000);
    s = await c.collect();
    expect(s.containers[0]!.cpuSeconds).toBeCloseTo(3.6, 9);

    // The exec'd process exits (reaped by the dev cluster, not a member): its 2 s are kept.
    gone(300);
    execProcess.pid = undefined;
    s = await c.collect();
    expect(s.containers[0]!.cpuSeconds).toBeCloseTo(3.6, 9);
    expect(s.containers[0]!.memoryBytes).toBe(1000 * 1024);

    // A counter that would go down (an odd /proc) stays where it was.
    writeProc(stat(100, 50, 100, 10, 0), 1000);
    s = await c.collect();
    expect(s.containers[0]!.cpuSeconds).toBeCloseTo(3.6, 9);
  });

  it('starts from zero when the main process restarted', async () => {
    const c = collector();
    writeProc(stat(100, 50, 100, 500));
    expect((await c.collect()).containers[0]!.cpuSeconds).toBe(5);
    gone(100);
    main.pid = 400;
    main.startedAt = '2026-01-01T00:01:00.000Z';
    writeProc(stat(400, 50, 400, 20));
    const s = await c.collect();
    expect(s.containers[0]!.cpuSeconds).toBe(0.2);
    expect(s.containers[0]!.startTimeSeconds).toBe(Date.parse('2026-01-01T00:01:00.000Z') / 1000);
  });
});

describe('ResourceMetricsCollector over real dev-cluster processes', () => {
  it("charges an exec'd busy loop to its container, children included, and keeps its time after it exits", async () => {
    const { startDevCluster } = await import('../../../dev/cluster/dev-cluster.js');
    const { runExec } = await import('../../../dev/cluster/runtime.js');
    const { defaultContainer } = await import('../../../dev/cluster/pod-registry.js');
    const cluster = await startDevCluster({});
    try {
      const pod = cluster.pods.create({ name: 'two', containers: [defaultContainer('a'), defaultContainer('b')] });
      const c = new ResourceMetricsCollector(cluster.pods);
      const cpuOf = async (container: string): Promise<number> =>
        (await c.collect()).containers.find((x) => x.pod === 'two' && x.container === container)!.cpuSeconds;
      // A shell (the exec'd root) whose child burns CPU: the child is charged through the process
      // tree. The abort below (SIGTERM to the session's process group) ends both.
      const abort = new AbortController();
      const exec = runExec({ pod, container: 'b', command: ['sh', '-c', 'sh -c "while :; do :; done"; true'] }, { tty: false }, abort.signal);
      const deadline = Date.now() + 20_000;
      let busy = 0;
      while (busy < 0.3 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100)); // poll until 0.3 s of CPU was used; bounded
        busy = await cpuOf('b');
      }
      expect(busy).toBeGreaterThanOrEqual(0.3);
      expect(await cpuOf('a')).toBeLessThan(busy);
      abort.abort();
      await exec;
      expect(pod.execs.size).toBe(0);
      expect(await cpuOf('b')).toBeGreaterThanOrEqual(busy); // the exited session's time is kept
    } finally {
      await cluster.close();
    }
  }, 30_000);
});
