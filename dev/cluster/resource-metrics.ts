/**
 * The dev cluster's resource usage, as a kubelet computes it for `/metrics/resource` from its
 * containers' cgroups, but read from `/proc` since dev-cluster pods are plain local processes.
 *
 * Which processes are a container's (its "cgroup"): the container's main process, the processes
 * exec'd into it (`Pod.execs`), every process in their process groups or below them in the process
 * tree (each of those roots leads its own process group: they are started detached or on a pty),
 * and, as a cgroup keeps its members, every process that was a member at the previous collection
 * and still runs (so a child that got a group of its own and was then reparented to init stays).
 * Only a process that leaves both group and tree between two collections escapes.
 *
 * CPU: a cgroup's usage is a counter that keeps the time of processes that have exited. Here the
 * counter is the sum over live members of utime+stime+cutime+cstime (a reaped child's time moves
 * into its parent's cutime/cstime), plus the last seen time of members that vanished without a
 * member parent to reap them (a root reaped by the dev cluster); the time such a process used
 * between its last sample and its exit is lost. The counter never decreases (metrics-server drops a
 * point whose cumulative CPU went down). It restarts from zero when the container's main process is
 * restarted, with the new `container_start_time_seconds`.
 *
 * Memory: the sum of the members' resident set sizes (`VmRSS`). A cgroup's working set is usage
 * minus inactive file pages; RSS counts shared pages once per process and no page cache, so it is
 * an approximation that is usually close for small processes.
 *
 * Node: the whole machine: busy CPU time from `/proc/stat`, and `MemTotal - MemAvailable` as its
 * working set (the kubelet uses the root cgroup's working set).
 */
import type { PodRegistry } from './pod-registry.js';
import {
  CLOCK_TICKS_PER_SECOND,
  readAllProcessStats,
  readMachineStats,
  readProcessRss,
  type ProcessStat,
} from './proc-stats.js';

/** One container's figures at {@link ResourceUsageSnapshot.timestampMs}. */
export interface ContainerUsage {
  namespace: string;
  pod: string;
  container: string;
  /** When the container's main process started, seconds since the epoch. */
  startTimeSeconds: number;
  /** Cumulative CPU time in core-seconds since the container started. */
  cpuSeconds: number;
  /** Working set (RSS sum) in bytes. */
  memoryBytes: number;
}

/** One pod's figures: the sums over its containers. */
export interface PodUsage {
  namespace: string;
  pod: string;
  cpuSeconds: number;
  memoryBytes: number;
}

/** Everything one `/metrics/resource` answer shows. */
export interface ResourceUsageSnapshot {
  /** When the figures were read, ms since the epoch. */
  timestampMs: number;
  /** The machine's figures; undefined when `/proc` did not give them. */
  node?: { cpuSeconds: number; memoryBytes: number };
  containers: ContainerUsage[];
  pods: PodUsage[];
}

/** Where the figures come from (tests may point `procRoot` elsewhere and fix the clock). */
export interface ResourceMetricsOptions {
  procRoot?: string;
  clockTicksPerSecond?: number;
  now?: () => number;
}

/**
 * The container each process belongs to: a root's own, else the one it belonged to before (`known`,
 * when it is the same process: same start time), else its process group leader's when that is a
 * root, else its nearest ancestor's. `roots` maps root pids to container keys.
 */
export function assignProcesses(
  roots: ReadonlyMap<number, string>,
  stats: ReadonlyMap<number, ProcessStat>,
  known: ReadonlyMap<number, { key: string; startTicks: number }> = new Map(),
): Map<number, string> {
  const owner = new Map<number, string | null>();
  const resolve = (pid: number, depth: number): string | null => {
    const memo = owner.get(pid);
    if (memo !== undefined) return memo;
    let key: string | null = roots.get(pid) ?? null;
    const stat = stats.get(pid);
    const before = known.get(pid);
    if (key === null && stat && before && before.startTicks === stat.startTicks) key = before.key;
    if (key === null && stat) {
      key = roots.get(stat.pgrp) ?? null;
      if (key === null && stat.ppid > 1 && stat.ppid !== pid && depth < 64) key = resolve(stat.ppid, depth + 1);
    }
    owner.set(pid, key);
    return key;
  };
  const result = new Map<number, string>();
  for (const pid of stats.keys()) {
    const key = resolve(pid, 0);
    if (key !== null) result.set(pid, key);
  }
  return result;
}

/** What is remembered of a member between two collections. */
interface SeenProcess {
  ticks: number;
  ppid: number;
  startTicks: number;
}

/** The running CPU counter of one container. */
interface ContainerCounter {
  startedAt: string;
  retiredTicks: number;
  seen: Map<number, SeenProcess>;
  lastTicks: number;
}

/** Reads the dev cluster's pods' usage from `/proc`; keeps the CPU counters between calls. */
export class ResourceMetricsCollector {
  readonly #counters = new Map<string, ContainerCounter>();
  readonly #procRoot: string;
  readonly #hz: number;
  readonly #now: () => number;

  constructor(
    private readonly registry: PodRegistry,
    options: ResourceMetricsOptions = {},
  ) {
    this.#procRoot = options.procRoot ?? '/proc';
    this.#hz = options.clockTicksPerSecond ?? CLOCK_TICKS_PER_SECOND;
    this.#now = options.now ?? Date.now;
  }

  /** Read every pod's and the machine's figures now. */
  async collect(): Promise<ResourceUsageSnapshot> {
    const timestampMs = this.#now();
    const pods = this.registry.list().filter((p) => !p.deleted);
    const roots = new Map<number, string>();
    const containers: { key: string; namespace: string; pod: string; container: string; startedAt: string }[] = [];
    for (const pod of pods) {
      for (const spec of pod.containers) {
        const key = `${pod.uid}/${spec.name}`;
        const main = pod.mains.get(spec.name);
        containers.push({ key, namespace: pod.namespace, pod: pod.name, container: spec.name, startedAt: main?.startedAt ?? pod.creationTimestamp });
        if (main?.pid !== undefined) roots.set(main.pid, key);
      }
      for (const exec of pod.execs) {
        const pid = exec.process.pid;
        if (pid !== undefined) roots.set(pid, `${pod.uid}/${exec.container}`);
      }
    }
    const [stats, machine] = await Promise.all([readAllProcessStats(this.#procRoot), readMachineStats(this.#procRoot)]);
    const known = new Map<number, { key: string; startTicks: number }>();
    for (const [key, counter] of this.#counters) for (const [pid, p] of counter.seen) known.set(pid, { key, startTicks: p.startTicks });
    const owners = assignProcesses(roots, stats, known);
    const members = new Map<string, ProcessStat[]>();
    for (const [pid, key] of owners) {
      const list = members.get(key) ?? [];
      list.push(stats.get(pid)!);
      members.set(key, list);
    }
    const rss = new Map<number, number>();
    await Promise.all(
      [...owners.keys()]
        .filter((pid) => stats.get(pid)!.state !== 'Z')
        .map(async (pid) => rss.set(pid, await readProcessRss(pid, this.#procRoot))),
    );

    const live = new Set<string>();
    const usage: ContainerUsage[] = containers.map((c) => {
      live.add(c.key);
      const list = members.get(c.key) ?? [];
      return {
        namespace: c.namespace,
        pod: c.pod,
        container: c.container,
        startTimeSeconds: Date.parse(c.startedAt) / 1000,
        cpuSeconds: this.#advance(c.key, c.startedAt, list, owners) / this.#hz,
        memoryBytes: list.reduce((sum, s) => sum + (rss.get(s.pid) ?? 0), 0),
      };
    });
    for (const key of this.#counters.keys()) if (!live.has(key)) this.#counters.delete(key);

    const byPod = new Map<string, PodUsage>();
    for (const c of usage) {
      const id = `${c.namespace}/${c.pod}`;
      const p = byPod.get(id) ?? { namespace: c.namespace, pod: c.pod, cpuSeconds: 0, memoryBytes: 0 };
      p.cpuSeconds += c.cpuSeconds;
      p.memoryBytes += c.memoryBytes;
      byPod.set(id, p);
    }
    const node =
      machine.cpu && machine.memoryBytes !== undefined
        ? { cpuSeconds: machine.cpu.busyTicks / this.#hz, memoryBytes: machine.memoryBytes }
        : undefined;
    return { timestampMs, node, containers: usage, pods: [...byPod.values()] };
  }

  /** The container's new counter value in ticks (see the file comment for the rules). */
  #advance(key: string, startedAt: string, list: ProcessStat[], owners: ReadonlyMap<number, string>): number {
    let counter = this.#counters.get(key);
    if (!counter || counter.startedAt !== startedAt) {
      counter = { startedAt, retiredTicks: 0, seen: new Map(), lastTicks: 0 };
      this.#counters.set(key, counter);
    }
    const now = new Map<number, SeenProcess>();
    for (const s of list) now.set(s.pid, { ticks: s.ownTicks + s.childTicks, ppid: s.ppid, startTicks: s.startTicks });
    for (const [pid, before] of counter.seen) {
      const still = now.get(pid);
      if (still && still.startTicks === before.startTicks) continue;
      // Gone. A member parent reaps it (its time moves into the parent's cutime); otherwise keep it.
      if (owners.get(before.ppid) !== key) counter.retiredTicks += before.ticks;
    }
    counter.seen = now;
    let liveTicks = 0;
    for (const p of now.values()) liveTicks += p.ticks;
    counter.lastTicks = Math.max(counter.lastTicks, counter.retiredTicks + liveTicks);
    return counter.lastTicks;
  }
}
