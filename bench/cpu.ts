/**
 * CPU cost per byte relayed (`npm run bench -- --cpu`): kubectl 1.33 moves N bytes of exec stdout,
 * exec stdin and port-forward through each relay in front of one dev cluster, and the relay's CPU
 * (utime+stime of its process tree from /proc, bench/proc-cpu.ts) is taken around each transfer.
 * Rounds are interleaved (round 1 runs every relay once, then round 2 …), so a burst of load on the
 * shared machine hits every relay alike. Relays: the proxy's passthrough, translation and port-forward
 * tunnel (the passthrough twice: with the splice(2) addon where it is built, and with the JavaScript
 * copy loop it falls back to), nginx (1 worker), HAProxy (HTTP mode, splice-auto), socat and the
 * bare Node relay. The tunnel-through-agent rows put the proxy (`serve --agent-listen`) and an agent
 * process between kubectl and the cluster (bench/agent-relay.ts) and take the CPU of both: the
 * proxy's as the row's relay CPU, the agent's in its own column.
 *
 * The dev cluster plays a 1.36 kube-apiserver and kubelet, which take WebSocket v5 and the
 * port-forward tunnel themselves (issue 32). The translation and tunnel rows measure the proxy's own
 * translator, so their proxies run `--upstream-streaming spdy` (bench/servers.ts `translateAtProxy`);
 * the `websocket-passthrough` rows run the default `auto`: kubectl 1.33's v5 exec and tunnel are
 * passed through byte for byte, the cost issue 32 item 8 compares with the SPDY passthrough. After
 * the warm-up each proxy's `/metrics` must show that its WebSocket sessions went the row's way.
 *
 * With `--tls` (CPU_TLS_RELAYS) the rows have TLS on the client leg and plain TCP to the dev
 * cluster: the proxy served with `--tls-cert-file/--tls-private-key-file` (passthrough, translation,
 * tunnel, WebSocket passthrough, and through an agent, whose tunnel is then TLS too), nginx `listen
 * ssl` (default buffers and `proxy_buffer_size 16k`), HAProxy `bind ssl`, the bare Node TLS relay
 * (bench/bare-tls-relay.ts) and the C floor (bench/tls-floor-relay.c, compiled at bench time). One
 * test PKI per run (dev/dev-pki.ts); kubectl's kubeconfig trusts its CA and holds a bearer token
 * that the dev cluster ignores (it takes anonymous requests; without credentials kubectl would
 * prompt). A TLS row's "× bare relay CPU" is against the bare Node TLS relay. Relays start side by
 * side and warm up two at a time; the measured rounds stay one transfer at a time.
 *
 * With `callgrind` the Node relays (the proxy and the bare relay, and an agent-tunnel row's agent)
 * run under valgrind's callgrind and each transfer's instruction count (Ir, user space) is read with
 * callgrind_control: unlike CPU seconds it does not depend on the machine's load, so it is what an
 * optimization is judged by.
 */
import { spawn, spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createTestPki, type CertAndKey } from '../dev/dev-pki.js';
import { writeKubeconfig } from '../dev/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl } from '../test/helpers/kubectl.js';
import { ensureDebianBinary } from './debian-package.js';
import { CLIENT } from './harness.js';
import { measureTransfer } from './kubectl-throughput.js';
import { startNginx } from './nginx.js';
import { measureDownload, startZeroServer, withPortForward } from './port-forward-throughput.js';
import { NATIVE_SPLICE_ENV } from '../proxy/splice-native.js';
import { sampleTreeCpu, settleTree } from './proc-cpu.js';
import { startBareRelay, startBareTlsRelay, startHaproxy, startSocat } from './relays.js';
import { prepareTlsFloor, startTlsFloor } from './tls-floor.js';
import { startAgentRelay, type AgentRelayProcess } from './agent-relay.js';
import { startDevClusterProcess, startProxyProcess, translateAtProxy, type ServerOptions, type ServerProcess } from './servers.js';
import { counterValue } from '../test/helpers/metrics.js';
import { HEAP_FLOOR_ENV } from '../src/heap-floor.js';

/** What a CPU row measures. */
export type CpuMeasurement = 'stdout' | 'stdin' | 'port-forward';
export const CPU_MEASUREMENTS: CpuMeasurement[] = ['stdout', 'stdin', 'port-forward'];

/** What a relay is started with. */
export interface RelayStartContext {
  /** The dev cluster's URL (the upstream of every relay). */
  upstream: string;
  /** A private temp folder. */
  workDir: string;
  /** Options for a Node relay's process (`--cpu-prof`, a valgrind wrapper). */
  node: ServerOptions;
  /** The run's test PKI, for a relay that serves TLS ({@link CpuRelay.tls}). */
  tls?: BenchTls;
}

/** The test PKI of a `--tls` run: the CA kubectl trusts and the loopback server certificate relays serve. */
export interface BenchTls {
  ca: CertAndKey;
  server: CertAndKey;
}

/** One relay between kubectl and the dev cluster. */
export interface CpuRelay {
  /** Short name for `--paths`. */
  key: string;
  /** Row label. */
  name: string;
  /** kubectl environment per measurement (protocol selection). */
  env: Partial<Record<CpuMeasurement, Record<string, string>>>;
  /** True for relays written in Node (they run under callgrind with `callgrind`). */
  node: boolean;
  /** The relay serves TLS to kubectl (its URL is https; its kubeconfig trusts the run's CA). */
  tls?: boolean;
  /**
   * For the proxy's rows with WebSocket measurements: the way its WebSocket sessions must go,
   * checked on its `/metrics` after the warm-up (`apiserver_websocket_streaming_requests_total`):
   * `translated` (translated_at_apiserver / tunneled_at_apiserver, the proxy's translator and tunnel)
   * or `passthrough` (proxied_to_upstream, none translated).
   */
  websocketWay?: 'translated' | 'passthrough';
  /** Why the relay cannot run (with the install command), or undefined. */
  prepare?(install: boolean, log: (line: string) => void): string | undefined;
  /**
   * Start it in front of the dev cluster; undefined for the direct path (no relay). A relay with an
   * agent returns an {@link AgentRelayProcess}: `pid` is the proxy's, the agent's CPU is taken too.
   */
  start(ctx: RelayStartContext): Promise<ServerProcess | AgentRelayProcess | undefined>;
}

/** The agent process of a started relay, if it has one. */
function agentOf(proc: ServerProcess | AgentRelayProcess | undefined): ServerProcess | undefined {
  return proc && 'agent' in proc ? proc.agent : undefined;
}

const GATES_OFF = 'TranslateStreamCloseWebsocketRequests=false,PortForwardWebsockets=false';
const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';
const SPDY_ALL = { stdout: { ...FORCE_SPDY_ENV }, stdin: { ...FORCE_SPDY_ENV }, 'port-forward': { ...FORCE_SPDY_ENV } };
/** kubectl 1.33's own choice: WebSocket v5 exec and the WebSocket port-forward tunnel. */
const WEBSOCKET_ALL = {
  stdout: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
  stdin: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
  'port-forward': { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' },
};

/** A relay found on the machine (Debian package), started by `start(bin, ctx)`. */
function debianRelay(key: string, name: string, pkg: string, binName: string, start: (bin: string, ctx: RelayStartContext) => Promise<ServerProcess>, tls = false): CpuRelay {
  let bin: string | undefined;
  return {
    key,
    name,
    env: SPDY_ALL,
    node: false,
    ...(tls ? { tls } : {}),
    prepare(install, log) {
      const found = ensureDebianBinary(pkg, binName, install, log);
      if ('skip' in found) return found.skip;
      bin = found.bin;
      return undefined;
    },
    start: (ctx) => {
      if (!bin) throw new Error(`${name}: prepare() first`);
      return start(bin, ctx);
    },
  };
}

/** Every relay of the CPU table, in row order; `direct` is the baseline of the wall ratio. */
export const CPU_RELAYS: CpuRelay[] = [
  { key: 'direct', name: 'direct (dev cluster, SPDY)', env: SPDY_ALL, node: false, start: async () => undefined },
  {
    key: 'passthrough',
    name: 'proxy passthrough (SPDY)',
    env: SPDY_ALL,
    node: true,
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_OFF], ctx.node),
  },
  {
    key: 'passthrough-js',
    name: 'proxy passthrough (SPDY), JS copy loop (KSP_NATIVE_SPLICE=0)',
    env: SPDY_ALL,
    node: true,
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_OFF], { ...ctx.node, env: { [NATIVE_SPLICE_ENV]: '0' } }),
  },
  // The translator's and the tunnel's rows: `--upstream-streaming spdy` (translateAtProxy), or the
  // 1.36 dev cluster would take kubectl's WebSockets itself and these rows would measure a passthrough.
  {
    key: 'translation',
    name: 'proxy translation (WS v5 → SPDY, --upstream-streaming spdy)',
    env: { stdout: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' }, stdin: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' } },
    node: true,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli)], ctx.node),
  },
  {
    key: 'tunnel',
    name: 'proxy port-forward tunnel (WS → SPDY, --upstream-streaming spdy)',
    env: { 'port-forward': { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' } },
    node: true,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli)], ctx.node),
  },
  {
    // Before / after of the heap floor (src/heap-floor.ts) in the same run: the proxy as it ran until
    // the floor, without the flag and without the CLI's re-execution.
    key: 'translation-nofloor',
    name: 'proxy translation / port-forward tunnel (--upstream-streaming spdy), no heap floor (KSP_HEAP_FLOOR_MB=0)',
    env: WEBSOCKET_ALL,
    node: true,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy()], { ...ctx.node, env: { ...ctx.node.env, [HEAP_FLOOR_ENV]: '0' } }),
  },
  {
    // The proxy started as a user starts it (issue 27): no flag from the bench, the CLI gives itself
    // the floor (on Node 20 by its one child process; the row's CPU is the pair's). Not a Node relay
    // for --cpu-prof and --callgrind: those would wrap or profile the first process, not the child.
    key: 'translation-cli-floor',
    name: 'proxy translation / port-forward tunnel (--upstream-streaming spdy), heap floor from the CLI (no flag given)',
    env: WEBSOCKET_ALL,
    node: false,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy()], { cliHeapFloor: true }),
  },
  {
    // Issue 32 item 8: kubectl 1.33's WebSocket v5 exec (stdout, stdin) and port-forward tunnel passed
    // through byte for byte to the dev cluster's 1.36 API (the default `--upstream-streaming auto`;
    // the apiserver look-alike hands them to its 1.36 kubelet). Target: ≤ 1.1× the bare Node relay,
    // as the SPDY passthrough.
    key: 'websocket-passthrough',
    name: 'proxy WebSocket passthrough (v5 exec, port-forward tunnel → 1.36 API)',
    env: WEBSOCKET_ALL,
    node: true,
    websocketWay: 'passthrough',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON], ctx.node),
  },
  {
    key: 'agent',
    name: 'via agent tunnel: translation / port-forward tunnel (WS → SPDY, --upstream-streaming spdy)',
    env: WEBSOCKET_ALL,
    node: true,
    websocketWay: 'translated',
    start: (ctx) => startAgentRelay(ctx.upstream, join(ctx.workDir, 'agent'), ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli)], ctx.node),
  },
  {
    key: 'agent-websocket',
    name: 'via agent tunnel: WebSocket passthrough (v5 exec, port-forward tunnel → 1.36 API)',
    env: WEBSOCKET_ALL,
    node: true,
    websocketWay: 'passthrough',
    start: (ctx) => startAgentRelay(ctx.upstream, join(ctx.workDir, 'agent-websocket'), ['--feature-gates', GATES_ON], ctx.node),
  },
  {
    key: 'agent-spdy',
    name: 'via agent tunnel: passthrough (SPDY)',
    env: SPDY_ALL,
    node: true,
    start: (ctx) => startAgentRelay(ctx.upstream, join(ctx.workDir, 'agent-spdy'), ['--feature-gates', GATES_OFF], ctx.node),
  },
  debianRelay('nginx', 'nginx 1 worker, upgrade passthrough', 'nginx', 'nginx', (bin, ctx) => startNginx(bin, ctx.upstream, join(ctx.workDir, 'nginx'))),
  debianRelay('haproxy', 'HAProxy HTTP mode, splice-auto', 'haproxy', 'haproxy', (bin, ctx) => startHaproxy(bin, ctx.upstream, join(ctx.workDir, 'haproxy'))),
  debianRelay('socat', 'socat (read/write)', 'socat', 'socat', (bin, ctx) => startSocat(bin, ctx.upstream)),
  { key: 'bare', name: 'bare Node relay (net + pipe())', env: SPDY_ALL, node: true, start: (ctx) => startBareRelay(ctx.upstream, ctx.node) },
];

/** The run's PKI, or an error naming the relay that wanted it. */
function tlsOf(ctx: RelayStartContext, key: string): BenchTls {
  if (!ctx.tls) throw new Error(`${key}: a TLS relay started without the run's PKI`);
  return ctx.tls;
}

/** The proxy's `serve` flags serving TLS with the run's server certificate. */
function proxyTlsArgs(ctx: RelayStartContext, key: string): string[] {
  const { server } = tlsOf(ctx, key);
  return ['--tls-cert-file', server.certFile, '--tls-private-key-file', server.keyFile];
}

/** The bearer token in a TLS row's kubeconfig (kubectl would prompt for basic auth without one). */
export const BENCH_TLS_TOKEN = 'kube-stream-proxy-bench';

/** The relay every TLS row's "× bare relay CPU" is relative to. */
export const BARE_TLS_RELAY_KEY = 'bare-tls';

/**
 * The `--cpu --tls` rows (issue 33 item 5): TLS from kubectl to the relay, plain TCP from the relay to
 * the dev cluster. The proxy's rows are its plain rows with `--tls-cert-file/--tls-private-key-file`
 * (the passthrough copies in JavaScript: splice(2) cannot carry TLS).
 */
export const CPU_TLS_RELAYS: CpuRelay[] = [
  {
    key: 'passthrough-tls',
    name: 'TLS: proxy passthrough (SPDY)',
    env: SPDY_ALL,
    node: true,
    tls: true,
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_OFF, ...proxyTlsArgs(ctx, 'passthrough-tls')], ctx.node),
  },
  {
    key: 'translation-tls',
    name: 'TLS: proxy translation (WS v5 → SPDY, --upstream-streaming spdy)',
    env: { stdout: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' }, stdin: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' } },
    node: true,
    tls: true,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli), ...proxyTlsArgs(ctx, 'translation-tls')], ctx.node),
  },
  {
    key: 'tunnel-tls',
    name: 'TLS: proxy port-forward tunnel (WS → SPDY, --upstream-streaming spdy)',
    env: { 'port-forward': { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' } },
    node: true,
    tls: true,
    websocketWay: 'translated',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli), ...proxyTlsArgs(ctx, 'tunnel-tls')], ctx.node),
  },
  {
    key: 'websocket-passthrough-tls',
    name: 'TLS: proxy WebSocket passthrough (v5 exec, port-forward tunnel → 1.36 API)',
    env: WEBSOCKET_ALL,
    node: true,
    tls: true,
    websocketWay: 'passthrough',
    start: (ctx) => startProxyProcess(ctx.upstream, ['--feature-gates', GATES_ON, ...proxyTlsArgs(ctx, 'websocket-passthrough-tls')], ctx.node),
  },
  {
    key: 'agent-tls',
    name: 'TLS: via agent tunnel (TLS too): translation / port-forward tunnel (WS → SPDY, --upstream-streaming spdy)',
    env: WEBSOCKET_ALL,
    node: true,
    tls: true,
    websocketWay: 'translated',
    start: (ctx) =>
      startAgentRelay(ctx.upstream, join(ctx.workDir, 'agent-tls'), ['--feature-gates', GATES_ON, ...translateAtProxy(ctx.node.cli), ...proxyTlsArgs(ctx, 'agent-tls')], ctx.node, undefined, {
        ca: tlsOf(ctx, 'agent-tls').ca.cert,
        caFile: tlsOf(ctx, 'agent-tls').ca.certFile,
      }),
  },
  {
    key: 'agent-websocket-tls',
    name: 'TLS: via agent tunnel (TLS too): WebSocket passthrough (v5 exec, port-forward tunnel → 1.36 API)',
    env: WEBSOCKET_ALL,
    node: true,
    tls: true,
    websocketWay: 'passthrough',
    start: (ctx) =>
      startAgentRelay(ctx.upstream, join(ctx.workDir, 'agent-websocket-tls'), ['--feature-gates', GATES_ON, ...proxyTlsArgs(ctx, 'agent-websocket-tls')], ctx.node, undefined, {
        ca: tlsOf(ctx, 'agent-websocket-tls').ca.cert,
        caFile: tlsOf(ctx, 'agent-websocket-tls').ca.certFile,
      }),
  },
  debianRelay(
    'nginx-tls',
    'TLS: nginx 1 worker, listen ssl, default buffers',
    'nginx',
    'nginx',
    (bin, ctx) => {
      const { server } = tlsOf(ctx, 'nginx-tls');
      return startNginx(bin, ctx.upstream, join(ctx.workDir, 'nginx'), undefined, undefined, { certFile: server.certFile, keyFile: server.keyFile });
    },
    true,
  ),
  debianRelay(
    'nginx-tls-16k',
    'TLS: nginx 1 worker, listen ssl, proxy_buffer_size 16k',
    'nginx',
    'nginx',
    (bin, ctx) => {
      const { server } = tlsOf(ctx, 'nginx-tls-16k');
      return startNginx(bin, ctx.upstream, join(ctx.workDir, 'nginx'), undefined, undefined, { certFile: server.certFile, keyFile: server.keyFile, proxyBufferSize: '16k' });
    },
    true,
  ),
  debianRelay('haproxy-tls', 'TLS: HAProxy HTTP mode, bind ssl', 'haproxy', 'haproxy', (bin, ctx) => startHaproxy(bin, ctx.upstream, join(ctx.workDir, 'haproxy'), tlsOf(ctx, 'haproxy-tls').server), true),
  {
    key: BARE_TLS_RELAY_KEY,
    name: 'TLS: bare Node TLS relay (tls.createServer + net.connect + pipe())',
    env: SPDY_ALL,
    node: true,
    tls: true,
    start: (ctx) => {
      const { server } = tlsOf(ctx, BARE_TLS_RELAY_KEY);
      return startBareTlsRelay(ctx.upstream, server.certFile, server.keyFile, ctx.node);
    },
  },
  tlsFloorRelay(),
];

/** The C floor: single-threaded epoll, Debian's OpenSSL server side, plain TCP upstream (bench/tls-floor.ts). */
function tlsFloorRelay(): CpuRelay {
  let cc: string | undefined;
  return {
    key: 'floor-tls',
    name: 'TLS: C floor relay (epoll, OpenSSL, 1 thread)',
    env: SPDY_ALL,
    node: false,
    tls: true,
    prepare(install, log) {
      const found = prepareTlsFloor(install, log);
      if ('skip' in found) return found.skip;
      cc = found.cc;
      return undefined;
    },
    start: (ctx) => {
      if (!cc) throw new Error('floor-tls: prepare() first');
      const { server } = tlsOf(ctx, 'floor-tls');
      return startTlsFloor(cc, ctx.upstream, join(ctx.workDir, 'build'), server.certFile, server.keyFile);
    },
  };
}

/** The proxy's own relays, which `--cpu --base DIR` also runs from another build. */
const PROXY_RELAY_KEYS: ReadonlySet<string> = new Set([
  'passthrough', 'passthrough-js', 'translation', 'tunnel', 'websocket-passthrough', 'agent', 'agent-spdy', 'agent-websocket',
  'passthrough-tls', 'translation-tls', 'tunnel-tls', 'websocket-passthrough-tls', 'agent-tls', 'agent-websocket-tls',
]);

/** The rows that need a proxy that passes WebSockets through (issue 32): left out for a base build from before it. */
const WEBSOCKET_PASSTHROUGH_KEYS: ReadonlySet<string> = new Set(['websocket-passthrough', 'agent-websocket', 'websocket-passthrough-tls', 'agent-websocket-tls']);

/**
 * The proxy's relays among `relays` once more, started from the build in `baseDir` (its
 * `bin/kube-stream-proxy.js` and `dist/`), keyed `KEY@base`: the same-run before/after of a change,
 * interleaved round by round with this tree's rows, so machine load hits both alike. A base that
 * does not know `--upstream-streaming` translates every WebSocket: its WebSocket-passthrough rows
 * are left out. The base's rows are not checked for their WebSocket way (an older build may not
 * count `apiserver_websocket_streaming_requests_total`).
 */
export function baseRelays(relays: readonly CpuRelay[], baseDir: string): CpuRelay[] {
  const cli = join(baseDir, 'bin', 'kube-stream-proxy.js');
  if (!existsSync(cli)) throw new Error(`--base: no ${cli} (a built checkout: npm ci && npm run build there)`);
  const passesWebSockets = translateAtProxy(cli).length > 0;
  return relays
    .filter((r) => PROXY_RELAY_KEYS.has(r.key) && (passesWebSockets || !WEBSOCKET_PASSTHROUGH_KEYS.has(r.key)))
    .map(({ websocketWay: _way, ...r }) => ({ ...r, key: `${r.key}@base`, name: `${r.name} [base]`, start: (ctx: RelayStartContext) => r.start({ ...ctx, node: { ...ctx.node, cli } }) }));
}

/**
 * Check, on the proxy's `/metrics`, that the WebSocket sessions of `relay` (its warm-up transfers)
 * went its {@link CpuRelay.websocketWay}; throws when they did not (a row would measure another path).
 */
export async function checkWebSocketWay(relay: CpuRelay, proc: ServerProcess | AgentRelayProcess, ca?: Buffer): Promise<void> {
  if (!relay.websocketWay) return;
  const base = 'proxy' in proc ? proc.proxy.url : proc.url;
  const res = await getText(new URL('/metrics', base), ca);
  if (res.status !== 200) throw new Error(`${relay.name}: GET ${base}/metrics: HTTP ${res.status}`);
  const text = res.body;
  const way = (subresource: string, proxyType: string): number => counterValue(text, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });
  const subresources: [string, string][] = [];
  if (relay.env.stdout || relay.env.stdin) subresources.push(['exec', 'translated_at_apiserver']);
  if (relay.env['port-forward']) subresources.push(['portforward', 'tunneled_at_apiserver']);
  for (const [subresource, translated] of subresources) {
    const counts = { passedThrough: way(subresource, 'proxied_to_upstream'), translated: way(subresource, translated) };
    const ok = relay.websocketWay === 'passthrough' ? counts.passedThrough > 0 && counts.translated === 0 : counts.translated > 0 && counts.passedThrough === 0;
    if (!ok) throw new Error(`${relay.name}: its ${subresource} WebSocket sessions were to be ${relay.websocketWay === 'passthrough' ? 'passed through' : 'translated by the proxy'}; its /metrics counts ${JSON.stringify(counts)}`);
  }
}

/** GET `url`; an https URL is verified with `ca` (the `--tls` run's CA). */
function getText(url: URL, ca?: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: import('node:http').IncomingMessage): void => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.once('error', reject);
    };
    const req = url.protocol === 'https:' ? httpsRequest(url, ca ? { ca } : {}, onResponse) : httpRequest(url, onResponse);
    req.once('error', reject);
    req.end();
  });
}

/** The relay the proxy's CPU targets are relative to. */
export const BARE_RELAY_KEY = 'bare';

/** Options of {@link runCpuBenchmarks}. */
export interface CpuBenchOptions {
  /** Bytes per transfer (full: 300 MB; quick: 20 MB). */
  bytes: number;
  /** Interleaved rounds (full: 3; quick: 1). */
  rounds: number;
  /** Only these relays (keys); default all. */
  relays?: CpuRelay[];
  /** Only these measurements; default all. */
  measurements?: CpuMeasurement[];
  /** Install nginx/HAProxy/socat when missing (default false: their rows are marked absent). */
  install?: boolean;
  /** `node --cpu-prof` for the Node relays, profiles under DIR/<key>/. */
  cpuProfDir?: string;
  /** Run the Node relays under callgrind and count instructions per transfer. */
  callgrind?: boolean;
  log?: (line: string) => void;
}

export const CPU_QUICK: Pick<CpuBenchOptions, 'bytes' | 'rounds'> = { bytes: 20_000_000, rounds: 1 };
export const CPU_FULL: Pick<CpuBenchOptions, 'bytes' | 'rounds'> = { bytes: 300_000_000, rounds: 3 };

/** One (relay, measurement) row. */
export interface CpuRow {
  relay: string;
  key: string;
  measurement: CpuMeasurement;
  bytes: number;
  /** Why the row was not measured (the relay is missing: its install command). */
  absent?: string;
  /** Wall time of each round, ms. */
  wallMs: number[];
  /** Relay CPU seconds of each round (undefined for the direct path). */
  cpuSeconds?: number[];
  /** Median relay CPU-s per GB (10^9 bytes). */
  cpuPerGB?: number;
  /** The agent's CPU seconds of each round (tunnel-through-agent rows only). */
  agentCpuSeconds?: number[];
  /** Median agent CPU-s per GB (tunnel-through-agent rows only). */
  agentCpuPerGB?: number;
  /** Median instructions (Ir) per MB of the relay process under callgrind. */
  irPerMB?: number;
  /** Median instructions (Ir) per MB of the agent process under callgrind (tunnel-through-agent rows). */
  agentIrPerMB?: number;
  /** Median throughput ÷ the direct path's, same measurement, same run. */
  wallRatio?: number;
  /** cpuPerGB ÷ the bare Node relay's, same measurement, same run. */
  cpuRatioToBare?: number;
}

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Send a callgrind_control command to `proc` and wait for it to be carried out. valgrind reads its
 * command file only while the client runs, so a relay idle in epoll is woken with a TCP connection
 * to its listening port (opened and closed) until the command returns. An agent has no listening
 * port (its `url` is the proxy's agent listener): it is woken by the tunnel's PINGs (every 10 s).
 */
export async function callgrindCommand(proc: ServerProcess, command: '--zero' | '--dump'): Promise<void> {
  const child = spawn('callgrind_control', [command, String(proc.pid)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  let done = false;
  void exited.then(() => (done = true));
  const { hostname, port } = new URL(proc.url);
  const deadline = Date.now() + 300_000;
  while (!done && Date.now() < deadline) {
    await new Promise<void>((resolve) => {
      const s = connect({ host: hostname, port: Number(port) }, () => s.end());
      s.on('error', () => resolve());
      s.on('close', () => resolve());
    });
    await Promise.race([exited, new Promise((r) => setTimeout(r, 200))]);
  }
  if (!done) child.kill('SIGKILL');
  const code = await exited;
  if (code !== 0 || !/OK/.test(output)) throw new Error(`callgrind_control ${command} ${proc.pid}: exit ${code}: ${output}`);
}

/** callgrind's instruction count (Ir) of `proc` since its last zeroing, read from a fresh dump. */
export async function callgrindDump(proc: ServerProcess, outDir: string): Promise<number> {
  const before = new Set(readdirSync(outDir));
  await callgrindCommand(proc, '--dump');
  const fresh = readdirSync(outDir).filter((f) => !before.has(f) && f.includes(`.${proc.pid}.`));
  if (fresh.length === 0) throw new Error(`callgrind_control --dump ${proc.pid} wrote no file in ${outDir} (it holds: ${readdirSync(outDir).join(", ")})`);
  let total = 0;
  for (const f of fresh) {
    const m = /^(?:summary|totals):\s*(\d+)/m.exec(readFileSync(join(outDir, f), 'utf8'));
    if (m) total += Number(m[1]);
    // KSP_CALLGRIND_KEEP=DIR keeps each dump there (for callgrind_annotate) instead of deleting it.
    const keep = process.env.KSP_CALLGRIND_KEEP;
    if (keep) {
      mkdirSync(keep, { recursive: true });
      copyFileSync(join(outDir, f), join(keep, f));
    }
    rmSync(join(outDir, f), { force: true });
  }
  return total;
}

/** Run the CPU benchmark: every relay × measurement, `rounds` interleaved rounds. */
export async function runCpuBenchmarks(o: CpuBenchOptions): Promise<CpuRow[]> {
  const log = o.log ?? (() => {});
  const relays = o.relays ?? CPU_RELAYS;
  const measurements = o.measurements ?? CPU_MEASUREMENTS;
  const timeoutMs = Math.max(60_000, (o.bytes / 2_000_000) * 1000) * (o.callgrind ? 20 : 1);
  const bin = findKubectl(CLIENT.version);
  const work = mkdtempSync(join(tmpdir(), 'ksp-bench-cpu-'));
  const cgDir = join(work, 'callgrind');
  if (o.callgrind) {
    mkdirSync(cgDir, { recursive: true });
    if (spawnSync('sh', ['-c', 'command -v valgrind && command -v callgrind_control']).status !== 0)
      throw new Error(`--callgrind needs valgrind (apt-get install -y -o DPkg::Lock::Timeout=300 valgrind)`);
  }
  const rows: CpuRow[] = [];
  const running = new Map<string, { proc: ServerProcess | AgentRelayProcess | undefined; kubeconfig: string }>();
  // One test PKI for every TLS relay of the run (certificates for 127.0.0.1; kubectl trusts the CA).
  let tls: BenchTls | undefined;
  if (relays.some((r) => r.tls)) {
    mkdirSync(join(work, 'pki'));
    tls = await createTestPki(join(work, 'pki'));
  }
  const zero = await startZeroServer();
  const cluster = await startDevClusterProcess();
  try {
    // Prepared one by one (a missing tool may be installed with apt-get), then started all at once
    // (each is its own process: on a loaded 2-core machine a dozen Node start-ups one after the
    // other take most of a quick run), then the rows in the relays' order.
    const started: CpuRelay[] = [];
    const absentWhy = new Map<string, string>();
    for (const relay of relays) {
      const todo = measurements.filter((m) => relay.env[m]);
      if (todo.length === 0) continue;
      const skip = relay.prepare?.(o.install ?? false, log);
      if (skip !== undefined) {
        log(`note: "${relay.name}" is absent: ${skip}`);
        absentWhy.set(relay.key, skip);
        continue;
      }
      started.push(relay);
    }
    const startedAt = Date.now();
    const starts = await Promise.allSettled(
      started.map(async (relay) => {
        const node: ServerOptions = {};
        if (o.cpuProfDir && relay.node) node.nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${join(o.cpuProfDir, relay.key)}`];
        if (o.callgrind && relay.node)
          node.wrapper = ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${join(cgDir, `cg.${relay.key}.%p`)}`];
        const proc = await relay.start({ upstream: cluster.url, workDir: join(work, relay.key), node, ...(relay.tls && tls ? { tls } : {}) });
        const kubeconfig = join(work, `kubeconfig-${relay.key}`);
        running.set(relay.key, { proc, kubeconfig });
        if (relay.tls && !proc?.url.startsWith('https://')) throw new Error(`${relay.name}: a TLS relay, but it serves ${proc?.url}`);
        // Over https kubectl prompts for a user name when its kubeconfig has no credentials: a TLS row's
        // carries a bearer token, which the dev cluster (no --token-auth-file) ignores: it takes the
        // request as anonymous, as it takes the plain rows' requests.
        writeKubeconfig(kubeconfig, { server: proc?.url ?? cluster.url, name: relay.key, ...(relay.tls && tls ? { caPem: tls.ca.cert.toString(), token: BENCH_TLS_TOKEN } : {}) });
      }),
    );
    const failed = starts.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    log(`${started.length} relay(s) started in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    for (const relay of relays) {
      const todo = measurements.filter((m) => relay.env[m]);
      if (todo.length === 0) continue;
      const absent = absentWhy.get(relay.key);
      if (absent !== undefined) {
        for (const m of todo) rows.push({ relay: relay.name, key: relay.key, measurement: m, bytes: o.bytes, absent, wallMs: [] });
        continue;
      }
      const { proc } = running.get(relay.key)!;
      for (const m of todo)
        rows.push({ relay: relay.name, key: relay.key, measurement: m, bytes: o.bytes, wallMs: [], ...(proc ? { cpuSeconds: [] } : {}), ...(agentOf(proc) ? { agentCpuSeconds: [] } : {}) });
    }
    const irs = new Map<CpuRow, number[]>();
    const agentIrs = new Map<CpuRow, number[]>();
    // One unmeasured warm-up transfer per row: the first session of a fresh Node process compiles
    // its code paths (JIT), which is start-up, not a cost per byte (under callgrind it dominates).
    // Relays warm up side by side, two at a time (each relay's rows one after the other).
    const warmBytes = Math.max(1_000_000, Math.min(10_000_000, Math.floor(o.bytes / 30_000_000) * 1_000_000));
    const warmRelay = async (relay: CpuRelay): Promise<void> => {
      const { kubeconfig } = running.get(relay.key)!;
      for (const row of rows.filter((r) => r.key === relay.key && !r.absent)) {
        const env = relay.env[row.measurement]!;
        if (row.measurement === 'port-forward')
          await withPortForward({ bin, kubeconfig, env, remotePort: zero.port, timeoutMs }, (port) => measureDownload(port, warmBytes, timeoutMs));
        else await measureTransfer({ bin, kubeconfig, env, direction: row.measurement, bytes: warmBytes, timeoutMs });
      }
    };
    const queue = relays.filter((r) => running.has(r.key));
    await Promise.all([0, 1].map(async () => {
      for (let relay = queue.shift(); relay; relay = queue.shift()) await warmRelay(relay);
    }));
    for (const relay of relays) {
      const { proc } = running.get(relay.key) ?? {};
      if (proc) await checkWebSocketWay(relay, proc, relay.tls ? tls?.ca.cert : undefined);
    }
    log(`warm-up done (${warmBytes / 1e6} MB per row, not measured; each proxy's WebSocket sessions went its row's way)`);
    for (let round = 1; round <= o.rounds; round++) {
      for (const m of measurements) {
        for (const row of rows.filter((r) => r.measurement === m && !r.absent)) {
          const relay = relays.find((r) => r.key === row.key)!;
          const { proc, kubeconfig } = running.get(row.key)!;
          const env = relay.env[m]!;
          const useCg = o.callgrind === true && relay.node && proc !== undefined;
          const agent = agentOf(proc);
          let before: ReturnType<typeof sampleTreeCpu> | undefined;
          let agentBefore: ReturnType<typeof sampleTreeCpu> | undefined;
          const begin = async (): Promise<void> => {
            if (useCg) await callgrindCommand(proc, '--zero');
            if (useCg && agent) await callgrindCommand(agent, '--zero');
            if (proc) before = sampleTreeCpu(proc.pid);
            if (agent) agentBefore = sampleTreeCpu(agent.pid);
          };
          let ms: number;
          if (m === 'port-forward') {
            ms = await withPortForward({ bin, kubeconfig, env, remotePort: zero.port, timeoutMs }, async (port) => {
              await begin();
              return measureDownload(port, o.bytes, timeoutMs);
            });
          } else {
            await begin();
            ms = (await measureTransfer({ bin, kubeconfig, env, direction: m, bytes: o.bytes, timeoutMs })).wallMs;
          }
          // For port-forward the forward's teardown is counted too (small, and every relay pays it).
          let cpu: number | undefined;
          if (proc && before) cpu = (await settleTree(proc.pid, before)).seconds - before.seconds;
          let agentCpu: number | undefined;
          if (agent && agentBefore) agentCpu = sampleTreeCpu(agent.pid).seconds - agentBefore.seconds;
          if (useCg) {
            const list = irs.get(row) ?? [];
            list.push(await callgrindDump(proc, cgDir));
            irs.set(row, list);
            if (agent) {
              const agentList = agentIrs.get(row) ?? [];
              agentList.push(await callgrindDump(agent, cgDir));
              agentIrs.set(row, agentList);
            }
          }
          row.wallMs.push(ms);
          if (cpu !== undefined) row.cpuSeconds!.push(cpu);
          if (agentCpu !== undefined) row.agentCpuSeconds!.push(agentCpu);
          const perGB =
            (cpu === undefined ? '' : `, relay ${(cpu / (o.bytes / 1e9)).toFixed(2)} CPU-s/GB`) +
            (agentCpu === undefined ? '' : `, agent ${(agentCpu / (o.bytes / 1e9)).toFixed(2)} CPU-s/GB`);
          log(`round ${round}/${o.rounds} ${row.relay} ${m}: ${(o.bytes / 1e6 / (ms / 1000)).toFixed(1)} MB/s${perGB}`);
        }
      }
    }
    for (const [row, list] of irs) row.irPerMB = median(list) / (o.bytes / 1e6);
    for (const [row, list] of agentIrs) row.agentIrPerMB = median(list) / (o.bytes / 1e6);
  } finally {
    for (const { proc } of running.values()) await proc?.close();
    await cluster.close();
    await zero.close();
    rmSync(work, { recursive: true, force: true });
  }
  for (const row of rows) {
    if (row.absent) continue;
    if (row.cpuSeconds && row.cpuSeconds.length > 0) row.cpuPerGB = median(row.cpuSeconds) / (row.bytes / 1e9);
    if (row.agentCpuSeconds && row.agentCpuSeconds.length > 0) row.agentCpuPerGB = median(row.agentCpuSeconds) / (row.bytes / 1e9);
    const direct = rows.find((r) => r.key === 'direct' && r.measurement === row.measurement && r.wallMs.length > 0);
    if (direct) row.wallRatio = median(direct.wallMs) / median(row.wallMs);
  }
  const tlsKeys = new Set(relays.filter((r) => r.tls).map((r) => r.key));
  for (const row of rows) {
    const bareKey = tlsKeys.has(row.key) ? BARE_TLS_RELAY_KEY : BARE_RELAY_KEY;
    const bare = rows.find((r) => r.key === bareKey && r.measurement === row.measurement);
    if (row.cpuPerGB !== undefined && bare?.cpuPerGB) row.cpuRatioToBare = row.cpuPerGB / bare.cpuPerGB;
  }
  return rows;
}

const HEAD = ['relay', 'measurement', 'amount', 'rounds', 'CPU-s per GB', '× bare relay CPU', '× direct (wall)', 'relay CPU-s (each round)', 'wall ms (each round)'];

/** Columns of the tunnel-through-agent rows, present when any row has an agent. */
const AGENT_HEAD = ['agent CPU-s per GB', 'agent CPU-s (each round)'];

function cells(r: CpuRow, withAgent: boolean, withIr: boolean): string[] {
  const c = [
    r.relay,
    r.measurement,
    `${r.bytes / 1e6} MB`,
    String(r.wallMs.length),
    r.absent ? 'absent' : r.cpuPerGB === undefined ? '–' : r.cpuPerGB.toFixed(2),
    r.cpuRatioToBare === undefined ? '' : r.cpuRatioToBare.toFixed(2),
    r.wallRatio === undefined ? '' : r.wallRatio.toFixed(2),
    r.absent ? r.absent : (r.cpuSeconds ?? []).map((s) => s.toFixed(2)).join(', '),
    r.wallMs.map((ms) => ms.toFixed(0)).join(', '),
  ];
  if (withAgent)
    c.push(r.agentCpuPerGB === undefined ? '' : r.agentCpuPerGB.toFixed(2), (r.agentCpuSeconds ?? []).map((s) => s.toFixed(2)).join(', '));
  if (withIr) c.push(r.irPerMB === undefined ? '' : (r.irPerMB / 1e6).toFixed(2));
  if (withIr && withAgent) c.push(r.agentIrPerMB === undefined ? '' : (r.agentIrPerMB / 1e6).toFixed(2));
  return c;
}

function head(rows: CpuRow[]): { head: string[]; withAgent: boolean; withIr: boolean } {
  const withAgent = rows.some((r) => r.agentCpuSeconds !== undefined);
  const withIr = rows.some((r) => r.irPerMB !== undefined);
  const irHead = withIr ? ['M instructions per MB (callgrind)', ...(withAgent ? ['agent M instructions per MB (callgrind)'] : [])] : [];
  return { head: [...HEAD, ...(withAgent ? AGENT_HEAD : []), ...irHead], withAgent, withIr };
}

/** Fixed-width text table of the CPU rows. */
export function cpuTextTable(rows: CpuRow[]): string {
  const { head: h, withAgent, withIr } = head(rows);
  const all = [h, ...rows.map((r) => cells(r, withAgent, withIr))];
  const widths = h.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(h), widths.map((w) => '-'.repeat(w)).join('  '), ...all.slice(1).map(line)].join('\n');
}

/** Start and end markers of the generated CPU section in docs/benchmarks.md. */
export const CPU_BEGIN = '<!-- begin generated cpu table -->';
export const CPU_END = '<!-- end generated cpu table -->';

/** The generated CPU section of docs/benchmarks.md (between {@link CPU_BEGIN} and {@link CPU_END}). */
export function cpuMarkdownSection(rows: CpuRow[], o: { machine: string; loadAverage: string; commandLine: string; date: Date }): string {
  const { head: h, withAgent, withIr } = head(rows);
  const numeric = new Set(['amount', 'rounds', 'CPU-s per GB', '× bare relay CPU', '× direct (wall)', 'agent CPU-s per GB', 'M instructions per MB (callgrind)', 'agent M instructions per MB (callgrind)']);
  const table = [
    `| ${h.join(' | ')} |`,
    `|${h.map((name) => (numeric.has(name) ? '---:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${cells(r, withAgent, withIr).join(' | ')} |`),
  ].join('\n');
  return `${CPU_BEGIN}
Generated by \`${o.commandLine}\` on ${o.date.toISOString()}; machine: ${o.machine}; load average
at the start: ${o.loadAverage}.

${table}
${CPU_END}`;
}

/** Replace the generated CPU section of `page` (or append it when the page has none). */
export function replaceCpuSection(page: string, section: string): string {
  const a = page.indexOf(CPU_BEGIN);
  const b = page.indexOf(CPU_END);
  if (a >= 0 && b > a) return page.slice(0, a) + section + page.slice(b + CPU_END.length);
  return `${page.trimEnd()}\n\n${section}\n`;
}

/** The file exists and has a generated CPU section. */
export function hasCpuSection(path: string): boolean {
  return existsSync(path) && readFileSync(path, 'utf8').includes(CPU_BEGIN);
}
