/**
 * The README's "What you can try" block, run line by line against a real `kube-stream-proxy demo`
 * process (what `npm start` runs) with kubectl 1.33 as `kubectl`. The lines are read from README.md
 * itself, so a line added there is run here: lines this file knows get their own assertions, any
 * other `kubectl …` line must exit 0 with output on stdout and no error.
 *
 * Each line runs as written in `sh -c`, after the block's `export` lines, in a folder that stands in
 * for the checkout (it holds a copy of README.md and the demo's default `.kube-stream-proxy/`). The
 * only changes: the demo listens on a free port instead of `npm start`'s 6443, so `:6443` in a line
 * becomes that port and a local port-forward port becomes a free one (`LOCAL:6443` → `:PORT`);
 * `exec -it` runs under tmux, where the test types at the pod's shell; `port-forward` runs until the
 * test has fetched `/healthz` through it.
 *
 * Which way each streaming line went is proven by counters (issue 32; test/tunnel/stream-ways.ts):
 * around every exec/cp/attach/port-forward line of the first two blocks, the proxy's `/metrics` and
 * the dev clusters' (their URLs and kubelets from the demo's banner) must move by exactly that line's
 * WebSocket sessions, the way the banner's kubelet says (passed through by the proxy; served by a
 * 1.36 kubelet itself, or translated by the apiserver of a 1.35 one). The README's `grep
 * websocket_streaming` lines must then print exactly those counts. The quick start's "`npm start`
 * prints something like" block is checked against what the demo printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { startDemo, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv } from '../helpers/kubectl.js';
import { startTmux } from '../helpers/tty.js';
import { counterValue } from '../helpers/metrics.js';
import { fetchClusterWays, moved, proxyWays, sumWays, websocketWays, type Ways } from '../tunnel/stream-ways.js';
import { approveDeviceCodeInChromium, launchChromium, type TestChromium } from '../helpers/chromium.js';

const ROOT = resolve(import.meta.dirname, '../..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
/** The port `npm start`'s demo listens on, as the README's lines assume. */
const DEFAULT_PORT = 6443;
const LINE_TIMEOUT_MS = 60_000;

/** A README section's text, up to the next `## ` heading. */
function readmeSection(readme: string, title: string): string {
  const section = new RegExp(`^## ${title}\\n([\\s\\S]*?)(?=^## )`, 'm').exec(readme)?.[1];
  if (!section) throw new Error(`README.md has no "## ${title}" section`);
  return section;
}

/** The ```sh block of a section ("What you can try" by default): its `export` lines and its commands (comments dropped). */
export function tryBlock(readme: string, title = 'What you can try'): { exports: string[]; commands: string[] } {
  const section = readmeSection(readme, title);
  const block = /^```sh\n([\s\S]*?)^```$/m.exec(section)?.[1];
  if (!block) throw new Error(`the "${title}" section has no \`\`\`sh block`);
  const lines = block
    .split('\n')
    .map((l) => l.replace(/\s+#\s.*$/, '').trim())
    .filter((l) => l !== '');
  const exports = lines.filter((l) => /^export \w+=/.test(l));
  const commands = lines.filter((l) => !exports.includes(l));
  for (const c of commands) if (!/^(kubectl|node bin\/kube-stream-proxy\.js)\s/.test(c)) throw new Error(`"${title}": only export, kubectl and node bin/kube-stream-proxy.js lines are run, got: ${c}`);
  return { exports, commands };
}

/** Outcome of one line. */
interface LineResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

interface Context {
  work: string;
  env: NodeJS.ProcessEnv;
  demo: DemoProcess;
  /** The line after the block's exports, as one `sh -c` script. */
  script: (command: string) => string;
  run: (command: string) => Promise<LineResult>;
  /** Streaming (exec/attach/cp/port-forward) lines run so far. */
  streamingSoFar: number;
  /** The demo's dev clusters, from its banner (none for the OIDC demo: its clusters want tokens). */
  clusters: DemoCluster[];
  /** The WebSocket counters the streaming lines moved so far (the proxy's and each cluster's). */
  tally: Ways;
}

/** A dev cluster of the demo, as its banner describes it. */
interface DemoCluster {
  /** `dev` for the single-cluster demo, else the cluster (= context) name. */
  name: string;
  url: string;
  /** `modern`: its kubelet declares ExtendWebSocketsToKubelet; `older-kubelet`: its apiserver translates. */
  kind: 'modern' | 'older-kubelet';
}

/** The dev clusters a demo's banner lists, with their URLs and kubelets. */
function demoClusters(output: string): DemoCluster[] {
  const kind = (declares: string): DemoCluster['kind'] => (declares === 'ExtendWebSocketsToKubelet' ? 'modern' : 'older-kubelet');
  const single = /^dev cluster listening on (http:\/\/\S+?); kubelet v\S+ declares (ExtendWebSocketsToKubelet|nothing)\b/m.exec(output);
  if (single) return [{ name: 'dev', url: single[1]!, kind: kind(single[2]!) }];
  return [...output.matchAll(/^dev cluster "(\S+)" listening on (http:\/\/\S+?), pods .*?; kubelet v\S+ declares (ExtendWebSocketsToKubelet|nothing)\b/gm)].map((m) => ({
    name: m[1]!,
    url: m[2]!,
    kind: kind(m[3]!),
  }));
}

/** The proxy's and every dev cluster's WebSocket counters now (fallbacks included). */
async function waysNow(ctx: Context): Promise<Ways> {
  const res = await fetch(new URL('/metrics', ctx.demo.proxyUrl));
  expect(res.status).toBe(200);
  const out = proxyWays(await res.text(), { fallbacks: true });
  for (const c of ctx.clusters) Object.assign(out, await fetchClusterWays(c.name, c.url));
  return out;
}

const STREAMING_LINE = /^kubectl (?:--context (\S+) )?(exec|cp|attach|port-forward)\b/;

/**
 * Run a README line's check; for a streaming line, also prove its way: the counters moved by exactly
 * its WebSocket sessions (kubectl 1.33 speaks WebSocket for all four), as its cluster's kind says.
 * `kubectl cp FILE POD:DEST` is two exec sessions (`test -d DEST`, then `tar xmf -`), and its check
 * reads the copy back with a third.
 */
async function runLine(line: string, ctx: Context, check: () => Promise<void>): Promise<void> {
  const m = STREAMING_LINE.exec(line);
  if (!m || ctx.clusters.length === 0) return check();
  const cluster = m[1] === undefined ? ctx.clusters[0]! : ctx.clusters.find((c) => c.name === m[1]);
  expect(cluster, `the demo's banner names no cluster ${m[1]}`).toBeDefined();
  const before = await waysNow(ctx);
  await check();
  const subresource = m[2] === 'port-forward' ? 'portforward' : m[2] === 'attach' ? 'attach' : 'exec';
  const expected = websocketWays(cluster!.kind, cluster!.name, subresource, m[2] === 'cp' ? 3 : 1);
  await expect.poll(async () => moved(before, await waysNow(ctx)), { timeout: 5_000 }).toEqual(expected);
  ctx.tally = sumWays(ctx.tally, expected);
}

/** The keys of `ways` under `prefix/`. */
function under(ways: Ways, prefix: string): Ways {
  return Object.fromEntries(Object.entries(ways).filter(([k]) => k.startsWith(`${prefix}/`)));
}

function runScript(script: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<LineResult> {
  return new Promise((done, fail) => {
    const child = spawn('sh', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`timed out after ${timeoutMs} ms: ${script}\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}

function expectSuccess(r: LineResult, line: string): void {
  expect({ code: r.code, signal: r.signal }, `${line}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).toEqual({ code: 0, signal: null });
}

/** A check for the lines it matches (first match wins); every other line gets {@link defaultCheck}. */
interface LineCheck {
  match: RegExp;
  check: (line: string, ctx: Context) => Promise<void>;
}

const CHECKS: LineCheck[] = [
  {
    // Interactive: the pod's shell under a real terminal; type a command, read its answer, exit 0.
    match: /^kubectl (?:--context \S+ )?exec -it \S+ -- sh$/,
    check: async (line, ctx) => {
      const term = await startTmux({ argv: ['sh', '-c', ctx.script(line)], env: ctx.env, cwd: ctx.work });
      try {
        // Typed before kubectl has the terminal in raw mode, a line can be flushed: re-type until answered.
        const ask = (): Promise<void> => term.sendLine('echo "tty: $(tty >/dev/null && echo yes)" hello-$((6*7))');
        await ask();
        await term.waitForScreen((s) => /^tty: yes hello-42$/m.test(s), 30_000, { onPoll: ask, retryEveryMs: 3000 });
        await term.sendLine('exit');
        expect(await term.waitForExit(30_000), await term.screen()).toBe(0);
      } finally {
        await term.kill();
      }
    },
  },
  {
    // npm start records pod demo: the shell of the exec -it line is listed, exit code 0, and plays back.
    match: /^node bin\/kube-stream-proxy\.js sessions list$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      const rows = r.stdout.trim().split('\n').map((l) => l.trim().split(/\s{2,}/));
      expect(rows[0]!.slice(0, 4)).toEqual(['ID', 'USER', 'CLUSTER/NAMESPACE/POD', 'COMMAND']);
      const shell = rows.find((row) => /^-\/default\/demo(\/demo)?$/.test(row[2]!) && row[3] === 'sh' && row[6] === '0');
      expect(shell, r.stdout).toBeDefined();
      const played = await ctx.run(`node bin/kube-stream-proxy.js sessions play ${shell![0]} --idle-time-limit 0.05`);
      expectSuccess(played, 'sessions play');
      expect(played.stdout).toContain('tty: yes hello-42');
    },
  },
  {
    // kubectl cp prints nothing: read the copy back through the proxy and compare the bytes.
    match: /^kubectl cp (\S+) demo:(\S+)$/,
    check: async (line, ctx) => {
      const [, local, remote] = /^kubectl cp (\S+) demo:(\S+)$/.exec(line)!;
      expectSuccess(await ctx.run(line), line);
      const back = await ctx.run(`kubectl exec demo -- cat ${remote}`);
      expectSuccess(back, `reading ${remote} back`);
      expect(back.stdout).toBe(readFileSync(join(ctx.work, local!), 'utf8'));
    },
  },
  {
    match: /^kubectl exec demo -- head -n 1 README\.md$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      expect(r.stdout).toBe(`${README.split('\n')[0]}\n`);
    },
  },
  {
    // Long-running: wait for the listener, fetch the proxy's /healthz through the tunnel, stop it.
    match: /^kubectl port-forward /,
    check: async (line, ctx) => {
      const child = spawn('sh', ['-c', ctx.script(`exec ${line}`)], { cwd: ctx.work, env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
      const exited = new Promise<void>((done) => child.on('close', () => done()));
      try {
        const forwarding = await new Promise<RegExpExecArray>((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`no "Forwarding from" within 30 s:\n${out}`)), 30_000);
          const look = (): void => {
            const m = /^Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)$/m.exec(out);
            if (m) {
              clearTimeout(timer);
              done(m);
            }
          };
          child.stdout.on('data', look);
          void exited.then(() => fail(new Error(`port-forward exited:\n${out}`)));
        });
        expect(Number(forwarding[2])).toBe(Number(ctx.demo.proxyUrl.port));
        const res = await fetch(`http://127.0.0.1:${forwarding[1]}/healthz`);
        expect(res.status).toBe(200);
        expect(await res.text()).toBe('ok');
      } finally {
        child.kill('SIGTERM');
        await exited;
      }
    },
  },
  {
    match: /^kubectl api-resources$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      expect(r.stdout).toMatch(/^NAME\s+SHORTNAMES\s+APIVERSION\s+NAMESPACED\s+KIND$/m);
      expect(r.stdout).toMatch(/^pods\s+po\s+v1\s+true\s+Pod$/m);
      expect(r.stdout).toMatch(/^pods\s+metrics\.k8s\.io\/v1beta1\s+true\s+PodMetrics$/m);
    },
  },
  {
    // Aggregated: dev-metrics has figures one scrape interval after start (as metrics-server needs a
    // window), so a line run in the first seconds may be retried, as a user would.
    match: /^kubectl top pod demo$/,
    check: async (line, ctx) => {
      const deadline = Date.now() + 20_000;
      let r = await ctx.run(line);
      while (r.code !== 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        r = await ctx.run(line);
      }
      expectSuccess(r, line);
      expect(r.stdout).toMatch(/^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*\ndemo\s+\d+m\s+\d+Mi\s*$/m);
    },
  },
  {
    match: /^kubectl get apiservices$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      expect(r.stdout).toMatch(/^v1beta1\.metrics\.k8s\.io\s+kube-system\/metrics-server\s+True\s+\S+\s*$/m);
    },
  },
  {
    // The proxy's own /metrics, through kubectl: kube-apiserver's stream counters and the project's,
    // counting the streaming sessions the lines before it opened.
    match: /^kubectl get --raw \/metrics$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      expect(r.stdout).toMatch(/^# TYPE apiserver_stream_translator_requests_total counter$/m);
      expect(r.stdout).toMatch(/^# TYPE kube_stream_proxy_upgrade_requests_total counter$/m);
      const upgrades = [...r.stdout.matchAll(/^kube_stream_proxy_upgrade_requests_total(?:\{[^}]*\})? (\d+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
      expect(upgrades).toBeGreaterThanOrEqual(ctx.streamingSoFar);
      // Which way each WebSocket session went: every one the lines before opened was passed through
      // (its cluster takes WebSockets); the proxy translated none.
      expect(r.stdout).toMatch(/^# TYPE apiserver_websocket_streaming_requests_total counter$/m);
      expect(proxyWays(r.stdout)).toEqual(under(ctx.tally, 'proxy'));
      expect(Object.keys(under(ctx.tally, 'proxy')).length, 'streaming lines ran before this one').toBeGreaterThan(0);
    },
  },
  {
    // The proxy's WebSocket counter: the sessions of the streaming lines run so far, each passed through.
    match: /^kubectl get --raw \/metrics \| grep websocket_streaming$/,
    check: async (line, ctx) => {
      const r = await ctx.run(line);
      expectSuccess(r, line);
      for (const l of r.stdout.trim().split('\n')) expect(l).toContain('websocket_streaming');
      expect(r.stdout).toMatch(/^# TYPE apiserver_websocket_streaming_requests_total counter$/m);
      expect(proxyWays(r.stdout)).toEqual(under(ctx.tally, 'proxy'));
      expect(Object.keys(under(ctx.tally, 'proxy')).length, 'streaming lines ran before this one').toBeGreaterThan(0);
    },
  },
  {
    // A dev cluster's kubelet (through the API's nodes/dev-node/proxy): the WebSocket sessions it
    // served itself, i.e. those of the streaming lines run so far in that cluster.
    match: /^kubectl get --raw (?:\/clusters\/(\S+))?\/api\/v1\/nodes\/dev-node\/proxy\/metrics \| grep websocket_streaming$/,
    check: async (line, ctx) => {
      const name = /^kubectl get --raw (?:\/clusters\/(\S+))?\/api\//.exec(line)![1] ?? 'dev';
      const cluster = ctx.clusters.find((c) => c.name === name);
      expect(cluster, `the demo's banner names no cluster ${name}`).toBeDefined();
      expect(cluster!.kind, 'the README reads the kubelet counter of a 1.36 kubelet').toBe('modern');
      const r = await ctx.run(line);
      expectSuccess(r, line);
      for (const l of r.stdout.trim().split('\n')) expect(l).toContain('websocket_streaming');
      expect(r.stdout).toMatch(/^# TYPE kubelet_websocket_streaming_requests_total counter$/m);
      const served = Object.fromEntries(
        (['exec', 'attach', 'portforward'] as const).map((s) => [`${name}/kubelet/${s}`, counterValue(r.stdout, 'kubelet_websocket_streaming_requests_total', { subresource: s })]).filter(([, n]) => n !== 0),
      );
      expect(served).toEqual(Object.fromEntries(Object.entries(ctx.tally).filter(([k]) => k.startsWith(`${name}/kubelet/`))));
      expect(Object.keys(served).length, 'streaming lines ran in that cluster before this one').toBeGreaterThan(0);
    },
  },
];

/** Checks of the "Clusters behind agents" block (before {@link CHECKS}). */
const CLUSTER_CHECKS: LineCheck[] = [
  {
    // Each context lists its own cluster's pods only: `demo` and the pod the demo's banner names.
    match: /^kubectl --context (\S+) get pods$/,
    check: async (line, ctx) => {
      const cluster = /^kubectl --context (\S+) get pods$/.exec(line)![1]!;
      const own = new RegExp(`^dev cluster "${cluster}" listening on \\S+, pods demo and (\\S+),`, 'm').exec(ctx.demo.output())?.[1];
      expect(own, ctx.demo.output()).toBeDefined();
      const r = await ctx.run(line);
      expectSuccess(r, line);
      const names = r.stdout.trim().split('\n').slice(1).map((l) => l.split(/\s+/)[0]);
      expect(names.sort()).toEqual([own, 'demo'].sort());
    },
  },
  {
    match: /^kubectl --context \S+ exec (\S+) -- echo (.+)$/,
    check: async (line, ctx) => {
      const [, , words] = /^kubectl --context \S+ exec (\S+) -- echo (.+)$/.exec(line)!;
      const r = await ctx.run(line);
      expectSuccess(r, line);
      expect(r.stdout).toBe(`${words}\n`);
    },
  },
];

/** Any other kubectl line: exit 0, something on stdout, no error on stderr. */
async function defaultCheck(line: string, ctx: Context): Promise<void> {
  const r = await ctx.run(line);
  expectSuccess(r, line);
  expect(r.stdout.trim(), line).not.toBe('');
  expect(r.stderr, line).not.toMatch(/error/i);
}

/** The README's line with the demo's real port in place of 6443 (and a free local port-forward port). */
function withDemoPort(line: string, port: string): string {
  return line.replace(new RegExp(`\\b\\d+:${DEFAULT_PORT}\\b`, 'g'), `:${port}`).replace(new RegExp(`:${DEFAULT_PORT}\\b`, 'g'), `:${port}`);
}

const { exports, commands } = tryBlock(README);

describe.skipIf(kubectlE2eSkipReason() !== undefined)('README "What you can try", line by line through npm start\'s demo', () => {
  let ctx: Context;
  let bin: string;

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'ksp-readme-'));
    copyFileSync(join(ROOT, 'README.md'), join(work, 'README.md'));
    // `kubectl` on PATH is kubectl 1.33.
    bin = join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(findKubectl('1.33'), join(bin, 'kubectl'));
    // `node bin/kube-stream-proxy.js …` lines run the checkout's CLI.
    symlinkSync(join(ROOT, 'bin', 'kube-stream-proxy.js'), join(bin, 'kube-stream-proxy.js'));
    // As `npm start`, but on a free port; the kubeconfig goes to its default place in `work`.
    const demo = await startDemo(work, ['--listen', '127.0.0.1:0']);
    expect(demo.kubeconfig).toBe(join(work, '.kube-stream-proxy', 'kubeconfig'));
    const env = kubectlEnv(demo.kubeconfig);
    delete env.KUBECONFIG; // the block's own export line must set it
    env.PATH = `${bin}${delimiter}${env.PATH ?? ''}`;
    const script = (command: string): string => [...exports, withDemoPort(command, demo.proxyUrl.port)].join('\n');
    ctx = { work, env, demo, script, run: (c) => runScript(script(c), work, env, LINE_TIMEOUT_MS), streamingSoFar: 0, clusters: demoClusters(demo.output()), tally: {} };
    expect(ctx.clusters.map((c) => [c.name, c.kind])).toEqual([['dev', 'modern']]);
  }, 60_000);

  afterAll(async () => {
    await ctx?.demo.stop();
    if (ctx) rmSync(ctx.work, { recursive: true, force: true });
  });

  it('has the lines the quick start promises (exec -it, cp, port-forward, api-resources, metrics) and an export of KUBECONFIG', () => {
    expect(exports).toContain('export KUBECONFIG="$PWD/.kube-stream-proxy/kubeconfig"');
    for (const want of [/^kubectl exec -it /, /^node bin\/kube-stream-proxy\.js sessions list$/, /^kubectl cp /, /^kubectl port-forward /, /^kubectl api-resources/, /^kubectl top pod /, /^kubectl get --raw \/metrics/]) {
      expect(commands.some((c) => want.test(c)), String(want)).toBe(true);
    }
  });

  it('npm start prints what the README\'s quick start shows', () => {
    // The block after "`npm start` prints something like:", line by line in order; `…` stands for
    // anything (a port, a folder), a line of its own for any lines.
    const block = /`npm start` prints something like:\n\n```\n([\s\S]*?)^```$/m.exec(readmeSection(README, 'Quick start'))?.[1];
    expect(block).toBeDefined();
    const printed = ctx.demo.output().split('\n');
    let at = 0;
    for (const want of block!.split('\n').filter((l) => l !== '' && l !== '…')) {
      const re = new RegExp(`^${want.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*?')}$`);
      const found = printed.findIndex((l, i) => i >= at && re.test(l));
      expect(found, `README line not printed (in this order) by the demo: ${want}\n${ctx.demo.output()}`).toBeGreaterThanOrEqual(0);
      at = found + 1;
    }
  });

  for (const line of commands) {
    it(line, async () => {
      const known = CHECKS.find((c) => c.match.test(line));
      await runLine(line, ctx, () => (known ? known.check(line, ctx) : defaultCheck(line, ctx)));
      if (/^kubectl (exec|attach|cp|port-forward)\b/.test(line)) ctx.streamingSoFar++;
    });
  }
});

const clusters = tryBlock(README, 'Clusters behind agents');
/** The demo's flags from the section's `npm start -- FLAGS` (what the README tells the reader to run). */
const clusterDemoArgs = (): string[] => {
  const m = /`npm start -- ([^`]+)`/.exec(readmeSection(README, 'Clusters behind agents'));
  if (!m) throw new Error('the "Clusters behind agents" section names no `npm start -- FLAGS`');
  return m[1]!.trim().split(/\s+/);
};

describe.skipIf(kubectlE2eSkipReason() !== undefined)('README "Clusters behind agents", line by line through `npm start -- --clusters 2`', () => {
  let ctx: Context;

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'ksp-readme-clusters-'));
    const bin = join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(findKubectl('1.33'), join(bin, 'kubectl'));
    const demo = await startDemo(work, [...clusterDemoArgs(), '--listen', '127.0.0.1:0']);
    const env = kubectlEnv(demo.kubeconfig);
    delete env.KUBECONFIG; // the block's own export line must set it
    env.PATH = `${bin}${delimiter}${env.PATH ?? ''}`;
    const script = (command: string): string => [...clusters.exports, command].join('\n');
    ctx = { work, env, demo, script, run: (c) => runScript(script(c), work, env, LINE_TIMEOUT_MS), streamingSoFar: 0, clusters: demoClusters(demo.output()), tally: {} };
  }, 60_000);

  afterAll(async () => {
    await ctx?.demo.stop();
    if (ctx) rmSync(ctx.work, { recursive: true, force: true });
  });

  it('asks for --clusters 2 and exports the same KUBECONFIG', () => {
    expect(clusterDemoArgs()).toEqual(['--clusters', '2']);
    expect(clusters.exports).toEqual(['export KUBECONFIG="$PWD/.kube-stream-proxy/kubeconfig"']);
    expect(clusters.commands.some((c) => /^kubectl --context one-modern exec -it /.test(c))).toBe(true);
    // Every context a line names is one of the kubeconfig's (one per cluster the demo started).
    const kubeconfig = JSON.parse(readFileSync(ctx.demo.kubeconfig, 'utf8')) as { contexts: { name: string }[] };
    const contexts = kubeconfig.contexts.map((c) => c.name);
    expect(contexts).toEqual(ctx.clusters.map((c) => c.name));
    for (const c of clusters.commands) {
      const named = /--context (\S+)/.exec(c)?.[1];
      if (named) expect(contexts, c).toContain(named);
    }
  });

  it('starts the two clusters the README describes: one-modern (kubelet 1.36, declares ExtendWebSocketsToKubelet) with alpha, two-older (kubelet 1.35, its apiserver translates) with beta', () => {
    const section = readmeSection(README, 'Clusters behind agents');
    expect(section).toContain('cluster `one-modern` (kubelet 1.36: it serves WebSocket exec/attach\nand the port-forward tunnel itself and declares `ExtendWebSocketsToKubelet`, so its apiserver passes\nWebSockets to it) has the pods `demo` and `alpha`');
    expect(section).toContain('`two-older` (kubelet 1.35: its apiserver translates\nWebSockets to SPDY, as 1.31–1.35 do) has `demo` and `beta`');
    const out = ctx.demo.output();
    expect(out).toMatch(/^dev cluster "one-modern" listening on \S+, pods demo and alpha, agent connected; kubelet v1\.36\.0 declares ExtendWebSocketsToKubelet: its apiserver passes WebSockets to it /m);
    expect(out).toMatch(/^dev cluster "two-older" listening on \S+, pods demo and beta, agent connected; kubelet v1\.35\.0 declares nothing: its apiserver translates WebSockets to SPDY /m);
    expect(ctx.clusters.map((c) => [c.name, c.kind])).toEqual([
      ['one-modern', 'modern'],
      ['two-older', 'older-kubelet'],
    ]);
  });

  for (const line of clusters.commands) {
    it(line, async () => {
      const known = [...CLUSTER_CHECKS, ...CHECKS].find((c) => c.match.test(line));
      await runLine(line, ctx, () => (known ? known.check(line, ctx) : defaultCheck(line, ctx)));
    });
  }
});

const oidc = tryBlock(README, 'Single sign-on \\(OIDC\\)');
/** The demo's flags from the section's first `npm start -- FLAGS`. */
const oidcDemoArgs = (): string[] => {
  const m = /`npm start -- ([^`]+)`/.exec(readmeSection(README, 'Single sign-on \\(OIDC\\)'));
  if (!m) throw new Error('the "Single sign-on (OIDC)" section names no `npm start -- FLAGS`');
  return m[1]!.trim().split(/\s+/);
};

describe.skipIf(kubectlE2eSkipReason() !== undefined)('README "Single sign-on (OIDC)", line by line through `npm start -- --oidc`', () => {
  let ctx: Context;
  let browser: TestChromium;

  beforeAll(async () => {
    const work = mkdtempSync(join(tmpdir(), 'ksp-readme-oidc-'));
    const bin = join(work, 'bin');
    mkdirSync(bin);
    symlinkSync(findKubectl('1.33'), join(bin, 'kubectl'));
    const demo = await startDemo(work, [...oidcDemoArgs(), '--listen', '127.0.0.1:0']);
    const env = kubectlEnv(demo.kubeconfig);
    delete env.KUBECONFIG; // the block's own export line must set it
    env.PATH = `${bin}${delimiter}${env.PATH ?? ''}`;
    const script = (command: string): string => [...oidc.exports, command].join('\n');
    // Its clusters want tokens: the ways of its streaming lines are not read here (no `clusters`).
    ctx = { work, env, demo, script, run: (c) => runScript(script(c), work, env, LINE_TIMEOUT_MS), streamingSoFar: 0, clusters: [], tally: {} };
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await ctx?.demo.stop();
    if (ctx) rmSync(ctx.work, { recursive: true, force: true });
  });

  it('asks for --oidc, exports the same KUBECONFIG, and signs in with whoami first', () => {
    expect(oidcDemoArgs()).toEqual(['--oidc']);
    expect(oidc.exports).toEqual(['export KUBECONFIG="$PWD/.kube-stream-proxy/kubeconfig"']);
    expect(oidc.commands[0]).toBe('kubectl auth whoami');
  });

  const OIDC_CHECKS: LineCheck[] = [
    {
      // The first line signs in: the plugin prints the device code on stderr; a person approves it in the browser.
      match: /^kubectl auth whoami$/,
      check: async (line, ctx) => {
        const child = spawn('sh', ['-c', ctx.script(line)], { cwd: ctx.work, env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
        const code = new Promise<number | null>((done) => child.on('close', (c) => done(c)));
        const device = await new Promise<RegExpExecArray>((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`no device code within 30 s:\n${stderr}`)), 30_000);
          child.stderr.on('data', (c: Buffer) => {
            stderr += c.toString('utf8');
            const m = /open (\S+) and enter the code (\S+)\)/.exec(stderr);
            if (m) {
              clearTimeout(timer);
              done(m);
            }
          });
          void code.then(() => fail(new Error(`exited before a device code:\n${stderr}`)));
        });
        const [, login, password] = /sign in as (\S+) \/ (\S+)\n/.exec(ctx.demo.output())!;
        expect(await approveDeviceCodeInChromium(browser.context, { verificationUri: device[1]!, userCode: device[2]!, login: login!, password: password! })).toContain('Sign-in Success');
        expect(await code, `${stdout}\n${stderr}`).toBe(0);
        expect(stdout).toMatch(/Username\s+alice@example\.com\n/);
        expect(stdout).toMatch(/Groups\s+\[oidc:developers system:authenticated\]\n/);
      },
    },
    {
      match: /^kubectl auth can-i create pods\/exec$/,
      check: async (line, ctx) => {
        const r = await ctx.run(line);
        expectSuccess(r, line);
        expect(r.stdout).toBe('yes\n');
        expect(r.stderr).not.toContain('Please visit');
      },
    },
  ];

  for (const line of oidc.commands) {
    it(line, async () => {
      const known = [...OIDC_CHECKS, ...CHECKS].find((c) => c.match.test(line));
      await (known ? known.check(line, ctx) : defaultCheck(line, ctx));
    });
  }
});
