/**
 * What an idle session retains in the proxy (profiling aid for the "Idle sessions" benchmark): the
 * proxy runs with `--heapsnapshot-signal`; a snapshot is taken after the warm-up and another with N
 * idle sessions open (the same sessions as bench/idle.ts: the dev cluster's `kube-stream-proxy:idle`,
 * client pings every 5 s), and the objects new in the second snapshot are summed per session:
 * - by node (constructor or V8 node name), count and self size;
 * - by retainer: the object's name with the edge that holds it on its shortest path from the GC roots
 *   (`Promise ← Foo.bar`), so the table says why each object is still there;
 * - one sample retainer path for the biggest groups.
 *
 *   node dist/bench/profile/idle-heap.js [translation|passthrough] [N] [--keep DIR]
 *   node dist/bench/profile/idle-heap.js --analyze BEFORE.heapsnapshot AFTER.heapsnapshot N
 *
 * A heap snapshot counts the JS heap plus what V8 and Node report as native (external buffers,
 * zlib); the process's RSS also holds the allocator's slack and the heap's free space.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EchoSession } from '../echo.js';
import { IDLE_EXEC_PATH, IDLE_PATHS } from '../idle.js';
import { startDevClusterProcess, startProxyProcess, type ServerProcess } from '../servers.js';
import { openSpdyExec } from '../spdy-client.js';
import { openWsExec } from '../ws-client.js';

interface Snapshot {
  nodeFields: number;
  edgeFields: number;
  nodes: Uint32Array;
  edges: Uint32Array;
  strings: string[];
  nodeTypes: string[];
  edgeTypes: string[];
  /** First edge index (into `edges`, in fields) of each node. */
  firstEdge: Uint32Array;
}

function loadSnapshot(file: string): Snapshot {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; edge_fields: string[]; node_types: [string[]]; edge_types: [string[]] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const meta = raw.snapshot.meta;
  const nodeFields = meta.node_fields.length;
  const edgeFields = meta.edge_fields.length;
  const nodes = Uint32Array.from(raw.nodes);
  const edges = Uint32Array.from(raw.edges);
  const count = nodes.length / nodeFields;
  const firstEdge = new Uint32Array(count + 1);
  const edgeCountAt = meta.node_fields.indexOf('edge_count');
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e;
    e += nodes[i * nodeFields + edgeCountAt]! * edgeFields;
    firstEdge[i + 1] = e;
  }
  return { nodeFields, edgeFields, nodes, edges, strings: raw.strings, nodeTypes: meta.node_types[0], edgeTypes: meta.edge_types[0], firstEdge };
}

// Node fields: type, name, id, self_size, edge_count, trace_node_id, detachedness. Edge fields: type, name_or_index, to_node.
const typeOf = (s: Snapshot, i: number): string => s.nodeTypes[s.nodes[i * s.nodeFields]!]!;
const idOf = (s: Snapshot, i: number): number => s.nodes[i * s.nodeFields + 2]!;
const sizeOf = (s: Snapshot, i: number): number => s.nodes[i * s.nodeFields + 3]!;

/** A short label: constructor name for objects, `(closure) name`, `(type) name` otherwise. */
function labelOf(s: Snapshot, i: number): string {
  const type = typeOf(s, i);
  const name = s.strings[s.nodes[i * s.nodeFields + 1]!]!;
  if (type === 'object') return name;
  if (type === 'closure') return `(closure) ${name || 'anonymous'}`;
  if (type === 'string' || type === 'concatenated string' || type === 'sliced string') return '(string)';
  if (type === 'number' || type === 'hidden' && name.length > 40) return `(${type})`;
  return `(${type}) ${name.length > 60 ? name.slice(0, 60) + '…' : name}`;
}

function edgeLabel(s: Snapshot, e: number): string {
  const type = s.edgeTypes[s.edges[e]!]!;
  const n = s.edges[e + 1]!;
  if (type === 'element' || type === 'hidden') return `[${n}]`;
  return s.strings[n] ?? String(n);
}

/** Shortest-path parent (node index, edge index) of every node from the root, over strong edges. */
function bfsParents(s: Snapshot): { parent: Int32Array; via: Int32Array } {
  const count = s.nodes.length / s.nodeFields;
  const parent = new Int32Array(count).fill(-1);
  const via = new Int32Array(count).fill(-1);
  const queue = new Uint32Array(count);
  let head = 0;
  let tail = 0;
  queue[tail++] = 0;
  parent[0] = 0;
  const weak = s.edgeTypes.indexOf('weak');
  const shortcut = s.edgeTypes.indexOf('shortcut');
  while (head < tail) {
    const i = queue[head++]!;
    for (let e = s.firstEdge[i]!; e < s.firstEdge[i + 1]!; e += s.edgeFields) {
      const t = s.edges[e]!;
      if (t === weak || t === shortcut) continue;
      const to = s.edges[e + 2]! / s.nodeFields;
      if (parent[to] !== -1) continue;
      parent[to] = i;
      via[to] = e;
      queue[tail++] = to;
    }
  }
  return { parent, via };
}

/**
 * Immediate dominators over strong edges (Cooper, Harvey & Kennedy's iterative algorithm on the
 * reverse postorder from the root), then retained sizes: a node's self size plus what it dominates.
 */
function retainedSizes(s: Snapshot): { idom: Int32Array; retained: Float64Array } {
  const count = s.nodes.length / s.nodeFields;
  const weak = s.edgeTypes.indexOf('weak');
  const shortcut = s.edgeTypes.indexOf('shortcut');
  const strong = (e: number): boolean => s.edges[e] !== weak && s.edges[e] !== shortcut;
  // Postorder by an explicit DFS.
  const order = new Int32Array(count).fill(-1); // postorder number
  const post: number[] = [];
  const stack: number[] = [0];
  const cursor = new Uint32Array(count);
  const seen = new Uint8Array(count);
  seen[0] = 1;
  cursor[0] = s.firstEdge[0]!;
  while (stack.length > 0) {
    const i = stack[stack.length - 1]!;
    let pushed = false;
    while (cursor[i]! < s.firstEdge[i + 1]!) {
      const e = cursor[i]!;
      cursor[i] = e + s.edgeFields;
      if (!strong(e)) continue;
      const to = s.edges[e + 2]! / s.nodeFields;
      if (seen[to]) continue;
      seen[to] = 1;
      cursor[to] = s.firstEdge[to]!;
      stack.push(to);
      pushed = true;
      break;
    }
    if (!pushed) {
      stack.pop();
      order[i] = post.length;
      post.push(i);
    }
  }
  // Predecessors (strong edges, reachable nodes only).
  const predCount = new Uint32Array(count + 1);
  for (let i = 0; i < count; i++) {
    if (!seen[i]) continue;
    for (let e = s.firstEdge[i]!; e < s.firstEdge[i + 1]!; e += s.edgeFields) if (strong(e)) predCount[s.edges[e + 2]! / s.nodeFields]!++;
  }
  const predStart = new Uint32Array(count + 1);
  for (let i = 0; i < count; i++) predStart[i + 1] = predStart[i]! + predCount[i]!;
  const preds = new Uint32Array(predStart[count]!);
  const fill = predStart.slice(0, count);
  for (let i = 0; i < count; i++) {
    if (!seen[i]) continue;
    for (let e = s.firstEdge[i]!; e < s.firstEdge[i + 1]!; e += s.edgeFields) if (strong(e)) preds[fill[s.edges[e + 2]! / s.nodeFields]!++] = i;
  }
  const idom = new Int32Array(count).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number): number => {
    while (a !== b) {
      while (order[a]! < order[b]!) a = idom[a]!;
      while (order[b]! < order[a]!) b = idom[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = post.length - 2; k >= 0; k--) {
      const i = post[k]!;
      let d = -1;
      for (let p = predStart[i]!; p < predStart[i + 1]!; p++) {
        const q = preds[p]!;
        if (idom[q] === -1) continue;
        d = d === -1 ? q : intersect(q, d);
      }
      if (d !== -1 && idom[i] !== d) {
        idom[i] = d;
        changed = true;
      }
    }
  }
  const retained = new Float64Array(count);
  for (const i of post) retained[i]! += sizeOf(s, i);
  for (const i of post) if (i !== 0 && idom[i]! >= 0) retained[idom[i]!]! += retained[i]!;
  return { idom, retained };
}

interface Group {
  count: number;
  bytes: number;
  sample: number;
}

function add(map: Map<string, Group>, key: string, bytes: number, node: number): void {
  const g = map.get(key);
  if (g) {
    g.count++;
    g.bytes += bytes;
  } else map.set(key, { count: 1, bytes, sample: node });
}

function pathOf(s: Snapshot, p: { parent: Int32Array; via: Int32Array }, node: number, depth = 12): string {
  const parts: string[] = [];
  let i = node;
  for (let d = 0; d < depth && i !== 0 && p.parent[i]! >= 0; d++) {
    parts.push(`${labelOf(s, i)}`);
    parts.push(`.${edgeLabel(s, p.via[i]!)}`);
    i = p.parent[i]!;
  }
  const out: string[] = [];
  for (let k = 0; k < parts.length; k += 2) out.push(`${parts[k]} ←${parts[k + 1]} of`);
  return out.join(' ') + ` ${labelOf(s, i)}`;
}

function table(title: string, groups: Map<string, Group>, sessions: number, top: number): string {
  const rows = [...groups.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  const lines = [`\n${title}`, `${'bytes/session'.padStart(13)}  ${'count/session'.padStart(13)}  what`];
  for (const [k, g] of rows) lines.push(`${(g.bytes / sessions).toFixed(0).padStart(13)}  ${(g.count / sessions).toFixed(2).padStart(13)}  ${k}`);
  return lines.join('\n');
}

async function snapshot(proxy: ServerProcess, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(proxy.pid, 'SIGUSR2');
  // The snapshot is written on the proxy's main thread: once it answers a request again, it is done.
  for (;;) {
    await new Promise((r) => setTimeout(r, 200));
    const added = readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (added.length === 0) continue;
    try {
      await fetch(new URL('/healthz', proxy.url));
    } catch {
      continue;
    }
    const file = join(dir, added[0]!);
    const size = statSync(file).size;
    await new Promise((r) => setTimeout(r, 200));
    if (statSync(file).size === size) return file;
  }
}

async function openSessions(kind: 'spdy' | 'ws', url: string, n: number): Promise<EchoSession[]> {
  const open = kind === 'spdy' ? openSpdyExec : openWsExec;
  const sessions: EchoSession[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++;
      const s = await open(url, 60_000, { path: IDLE_EXEC_PATH, pingIntervalMs: 5_000 });
      s.send(Buffer.from('i'));
      await s.expect(1);
      sessions.push(s);
    }
  };
  await Promise.all(Array.from({ length: Math.min(200, n) }, worker));
  return sessions;
}

/** The dominator subtree of `node` down to `depth`, children above 40 bytes retained, with the edge that holds each. */
function explain(s: Snapshot, idom: Int32Array, retained: Float64Array, node: number, depth: number): string[] {
  const children = new Map<number, number[]>();
  const want = new Set<number>([node]);
  const lines: string[] = [];
  const walk = (i: number, d: number, indent: string, via: string): void => {
    lines.push(`${indent}${retained[i]!.toFixed(0).padStart(6)}  ${via}${labelOf(s, i)}`);
    if (d === depth) return;
    const kids: Array<[number, string]> = [];
    for (let e = s.firstEdge[i]!; e < s.firstEdge[i + 1]!; e += s.edgeFields) {
      const to = s.edges[e + 2]! / s.nodeFields;
      if (idom[to] === i && !kids.some(([k]) => k === to)) kids.push([to, `.${edgeLabel(s, e)} = `]);
    }
    kids.sort((a, b) => retained[b[0]]! - retained[a[0]]!);
    for (const [k, v] of kids) if (retained[k]! >= 40) walk(k, d + 1, indent + '  ', v);
  };
  void children;
  void want;
  walk(node, 0, '', '');
  return lines;
}

/** Print what is new in `afterFile` relative to `beforeFile`, per session. */
function analyze(beforeFile: string, afterFile: string, count: number): void {
  const before = loadSnapshot(beforeFile);
  const oldIds = new Set<number>();
  for (let i = 0; i < before.nodes.length / before.nodeFields; i++) oldIds.add(idOf(before, i));
  let beforeTotal = 0;
  for (let i = 0; i < before.nodes.length / before.nodeFields; i++) beforeTotal += sizeOf(before, i);

  const after = loadSnapshot(afterFile);
  const parents = bfsParents(after);
  const byNode = new Map<string, Group>();
  const byRetainer = new Map<string, Group>();
  let afterTotal = 0;
  let newBytes = 0;
  for (let i = 0; i < after.nodes.length / after.nodeFields; i++) {
    const size = sizeOf(after, i);
    afterTotal += size;
    if (oldIds.has(idOf(after, i))) continue;
    newBytes += size;
    const label = labelOf(after, i);
    add(byNode, label, size, i);
    const p = parents.parent[i]!;
    const holder = p >= 0 ? `${labelOf(after, p)}.${edgeLabel(after, parents.via[i]!)}` : '(unreachable)';
    add(byRetainer, `${label} ← ${holder}`, size, i);
  }
  const { idom, retained } = retainedSizes(after);
  const byRetained = new Map<string, Group>();
  for (let i = 0; i < after.nodes.length / after.nodeFields; i++) {
    if (oldIds.has(idOf(after, i))) continue;
    const t = typeOf(after, i);
    if (t !== 'object' && t !== 'closure' && t !== 'native' && t !== 'synthetic') continue;
    add(byRetained, labelOf(after, i), retained[i]!, i);
  }
  console.log(`total self size: before ${(beforeTotal / 1024 / 1024).toFixed(1)} MiB, after ${(afterTotal / 1024 / 1024).toFixed(1)} MiB; ` +
    `difference ${((afterTotal - beforeTotal) / count / 1024).toFixed(2)} KiB/session; new objects ${(newBytes / count / 1024).toFixed(2)} KiB/session`);
  console.log(table('new objects by node', byNode, count, 45));
  console.log(table('new objects by retainer (shortest path from the GC roots)', byRetainer, count, 70));
  console.log(table('new objects by retained size (dominator tree; nested groups overlap)', byRetained, count, 60));
  for (const name of (process.env.KSP_EXPLAIN ?? 'SpdyStream,Socket,AbortController,Generator,ChannelWebSocket,SpdyConnection,ServerResponse,Promise').split(',')) {
    const g = byRetained.get(name);
    if (!g) continue;
    console.log(`\ndominator subtree of one ${name}`);
    for (const l of explain(after, idom, retained, g.sample, Number(process.env.KSP_EXPLAIN_DEPTH ?? 3))) console.log(l);
  }
  console.log('\nsample retainer paths');
  const named = (process.env.KSP_PATHS ?? 'AbortController,Generator,ServerResponse,IncomingMessage,HeaderList,Request,Promise').split(',');
  const sampled = [...byNode.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 25).map(([k]) => k);
  for (const k of [...named, ...sampled]) {
    const g = byNode.get(k);
    if (g) console.log(`- ${k}: ${pathOf(after, parents, g.sample, 16)}`);
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--analyze') return analyze(args[1]!, args[2]!, Number(args[3]));
  const keepAt = args.indexOf('--keep');
  const keep = keepAt >= 0 ? args.splice(keepAt, 2)[1] : undefined;
  const pathKey = args[0] ?? 'translation';
  const n = Number(args[1] ?? 1000);
  const path = IDLE_PATHS.find((p) => p.key === pathKey);
  if (!path) throw new Error(`unknown path ${pathKey}`);
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'idle-heap-'));
  const cluster = await startDevClusterProcess();
  const proxy = await startProxyProcess(cluster.url, path.proxyArgs, { nodeArgs: ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`] });
  let sessions: EchoSession[] = [];
  try {
    for (const s of await openSessions(path.client, proxy.url, 20)) await s.close();
    await new Promise((r) => setTimeout(r, 1_000));
    const beforeFile = await snapshot(proxy, dir);
    sessions = await openSessions(path.client, proxy.url, n);
    // Past the first pings (5 s) so per-session ping state exists as it does in the idle window.
    await new Promise((r) => setTimeout(r, 6_000));
    const afterFile = await snapshot(proxy, dir);
    console.log(`${path.name}: ${sessions.length} idle sessions; snapshots ${beforeFile}, ${afterFile}`);

    analyze(beforeFile, afterFile, sessions.length);
  } finally {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await proxy.close();
    await cluster.close();
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

await main();
