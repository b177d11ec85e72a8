/**
 * `npm run bench -- --auth`: what authentication costs the proxy (issue 22). The proxy runs as its
 * own process with `--authn impersonate --authentication-config` in front of a dev cluster process
 * with token authentication; the issuer is the demo's OpenID Provider (`dev/oidc-issuer.ts`) in
 * this process. Two tables:
 *
 * 1. CPU per request: the proxy process's CPU time (/proc, utime+stime) over N keep-alive
 *    `GET /api/v1/namespaces/default/pods/demo` requests, divided by N, for
 *    - a TokenReview cache hit (the same opaque token each time; one review per 10 s TTL),
 *    - a cached JWT (the same ES256 ID token each time),
 *    - an uncached ES256 JWT and an uncached RS256 JWT (a new token per request, minted beforehand),
 *    - and, as the floor, the passthrough proxy (`--authn passthrough`: it authenticates nothing,
 *      the caller's token goes upstream), with the same proxy built from another checkout
 *      (`--auth-baseline DIR`) beside it: the before/after of the unauthenticated path.
 *    Rows run interleaved for `rounds` rounds; the median is reported.
 * 2. Exec latency: sequential WebSocket v5 execs of `true` (upgrade request → channel-3 Status →
 *    close) authenticated by a cached JWT, an uncached ES256 JWT and a TokenReview cache hit,
 *    interleaved one by one; p50 and p99 of each, and the JWT rows' added p99 against TokenReview.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startDevOidcIssuer, DEMO_CLIENT_ID, type DevOidcIssuer } from '../dev/oidc-issuer.js';
import { percentiles, median } from './latency.js';
import { sampleTreeCpu } from './proc-cpu.js';
import { startCli, startNodeScript, SERVER_START_TIMEOUT_MS, type ServerProcess } from './servers.js';

/** Sizes of one run. */
export interface AuthBenchOptions {
  /** Requests per CPU row per round. */
  requests: number;
  /** Concurrent keep-alive connections of the CPU rows. */
  concurrency: number;
  /** Execs per latency row. */
  execs: number;
  rounds: number;
  /** Another checkout's `bin/kube-stream-proxy.js` (built), for the passthrough before/after. */
  baselineCli?: string;
  log: (line: string) => void;
}

export const AUTH_FULL: Omit<AuthBenchOptions, 'log'> = { requests: 4_000, concurrency: 4, execs: 500, rounds: 5 };
export const AUTH_QUICK: Omit<AuthBenchOptions, 'log'> = { requests: 300, concurrency: 4, execs: 20, rounds: 1 };

/** One CPU row. */
export interface AuthCpuRow {
  name: string;
  /** Median over rounds, µs of proxy CPU per request. */
  cpuUsPerRequest: number;
  perRound: number[];
}

/** One latency row. */
export interface AuthLatencyRow {
  name: string;
  p50Ms: number;
  p99Ms: number;
}

const PROXY_TOKEN = 'bench-proxy-token-0123456789';
const ROBOT_TOKEN = 'bench-robot-token-0123456789';
const POD = '/api/v1/namespaces/default/pods/demo';

/** N GETs over `concurrency` keep-alive connections; rejects on any status but 200. */
async function drive(base: string, tokens: (i: number) => string | undefined, n: number, concurrency: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const one = (i: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const token = tokens(i);
      const req = request(`${base}${POD}`, { agent, headers: token ? { Authorization: `Bearer ${token}` } : {} }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`GET ${POD}: ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end();
    });
  const worker = async (): Promise<void> => {
    while (next < n) await one(next++);
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    agent.destroy();
  }
}

/** Proxy CPU µs per request of `n` requests. */
async function cpuPerRequest(proxy: ServerProcess, tokens: (i: number) => string | undefined, n: number, concurrency: number): Promise<number> {
  // Warm: connections, JIT, and (uncached rows) the same code path; its requests are not counted.
  await drive(proxy.url, tokens, Math.min(500, n), concurrency);
  const before = sampleTreeCpu(proxy.pid).seconds;
  await drive(proxy.url, tokens, n, concurrency);
  return ((sampleTreeCpu(proxy.pid).seconds - before) / n) * 1e6;
}

/** One exec of `true` over WebSocket v5, ms from the upgrade request to the close. */
function execOnce(base: string, token: string): Promise<number> {
  const url = `${base.replace(/^http/, 'ws')}/api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true`;
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
    let status = '';
    ws.on('message', (d: Buffer) => {
      if (d[0] === 3) status = d.subarray(1).toString();
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`exec: HTTP ${res.statusCode}`)));
    ws.on('error', reject);
    ws.on('close', () => (status.includes('Success') ? resolve(Number(process.hrtime.bigint() - t0) / 1e6) : reject(new Error(`exec ended without success: ${status}`))));
  });
}

/** The processes every mode runs: the issuer (in this process), the dev cluster, the proxies. */
interface Topology {
  idp: DevOidcIssuer;
  jwtProxy: ServerProcess;
  passthrough: ServerProcess;
  baseline?: ServerProcess;
}

/** Start the topology; every stop goes to `stops`. `wrapper` runs the proxies under e.g. callgrind. */
async function startTopology(dir: string, stops: (() => Promise<void>)[], o: { baselineCli?: string; wrapper?: (name: string) => string[] }): Promise<Topology> {
  const idp: DevOidcIssuer = await startDevOidcIssuer({ idTokenTtl: 3600 });
  stops.push(() => idp.close());
  writeFileSync(join(dir, 'tokens.csv'), `${PROXY_TOKEN},kube-stream-proxy,p,""\n${ROBOT_TOKEN},robot,r,"bench"\n`);
  writeFileSync(
    join(dir, 'policy.json'),
    JSON.stringify({
      rules: [
        { users: ['kube-stream-proxy'], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
        { users: ['kube-stream-proxy'], verbs: ['impersonate'], resources: ['users', 'groups', 'uids', 'userextras/authentication.kubernetes.io/credential-id'] },
        { groups: ['bench', 'oidc:bench'], verbs: ['*'], resources: ['*'] },
      ],
    }),
  );
  writeFileSync(join(dir, 'proxy.token'), PROXY_TOKEN);
  writeFileSync(
    join(dir, 'auth.yaml'),
    `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ${idp.issuer}
    audiences: [${DEMO_CLIENT_ID}]
    certificateAuthority: ${JSON.stringify(idp.ca)}
  claimMappings:
    username: {claim: email, prefix: ""}
    groups: {claim: groups, prefix: "oidc:"}
`,
  );
  const cluster = await startCli(
    ['dev-cluster', '--listen', '127.0.0.1:0', '--token-auth-file', join(dir, 'tokens.csv'), '--authorization-policy-file', join(dir, 'policy.json')],
    /^dev cluster listening on /,
  );
  stops.push(() => cluster.close());
  const serve = (extra: string[]): string[] => ['serve', '--listen', '127.0.0.1:0', '--upstream', cluster.url, ...extra];
  const ready = /^kube-stream-proxy listening on /;
  const wrap = (name: string): { wrapper?: string[] } => (o.wrapper ? { wrapper: o.wrapper(name) } : {});
  const jwtProxy = await startCli(serve(['--authn', 'impersonate', '--upstream-token-file', join(dir, 'proxy.token'), '--authentication-config', join(dir, 'auth.yaml')]), ready, SERVER_START_TIMEOUT_MS, wrap('jwt'));
  stops.push(() => jwtProxy.close());
  const passthrough = await startCli(serve([]), ready, SERVER_START_TIMEOUT_MS, wrap('passthrough'));
  stops.push(() => passthrough.close());
  const baseline = o.baselineCli ? await startNodeScript(o.baselineCli, serve([]), ready, SERVER_START_TIMEOUT_MS, { nodeArgs: ['--initial-old-space-size=128'], ...wrap('baseline') }) : undefined;
  if (baseline) stops.push(() => baseline.close());
  // Ready once the issuer's keys are known.
  for (const deadline = Date.now() + (o.wrapper ? 600_000 : 30_000); ; ) {
    const ok = await fetch(`${jwtProxy.url}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (Date.now() > deadline) throw new Error('bench --auth: the JWT proxy did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { idp, jwtProxy, passthrough, ...(baseline ? { baseline } : {}) };
}

/** The bench user's claims; valid for 6 hours (a run under callgrind takes tens of minutes). */
const CLAIMS = { email: 'bench@example.com', email_verified: true, groups: ['bench'], exp: Math.floor(Date.now() / 1000) + 6 * 3600 };

/** `n` distinct tokens (a unique `jti` each) signed with the issuer's `alg` key. */
async function mintMany(idp: DevOidcIssuer, alg: 'ES256' | 'RS256', n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await idp.mint({ ...CLAIMS, jti: `${alg}-${i}-${Math.random()}` }, { alg }));
  return out;
}

/** One CPU row: which proxy, and the token of each request (a fresh supplier per measurement). */
interface RowSpec {
  name: string;
  proxy: ServerProcess;
  token: (round: number) => (i: number) => string | undefined;
}

/** The CPU rows over `t`; uncached rows draw `perRound` distinct tokens per round. */
async function cpuRows(t: Topology, rounds: number, perRound: number, log: (line: string) => void): Promise<RowSpec[]> {
  const cachedJwt = await t.idp.mint(CLAIMS, { alg: 'ES256' });
  log(`minting ${perRound * rounds * 2} tokens`);
  const es = await mintMany(t.idp, 'ES256', perRound * rounds);
  const rs = await mintMany(t.idp, 'RS256', perRound * rounds);
  // A round's tokens: a fresh one per call, never one of another round (the warm-up draws from the same supply).
  const uncached = (all: string[], r: number): ((i: number) => string) => {
    let next = r * perRound;
    return () => all[next++]!;
  };
  return [
    // Passthrough: the proxy verifies nothing; the caller's token goes upstream as it is.
    { name: 'passthrough (this build)', proxy: t.passthrough, token: () => () => ROBOT_TOKEN },
    ...(t.baseline ? [{ name: 'passthrough (baseline build)', proxy: t.baseline, token: () => () => ROBOT_TOKEN }] : []),
    { name: 'impersonate, TokenReview cache hit', proxy: t.jwtProxy, token: () => () => ROBOT_TOKEN },
    { name: 'impersonate, JWT cached (ES256)', proxy: t.jwtProxy, token: () => () => cachedJwt },
    { name: 'impersonate, JWT uncached ES256', proxy: t.jwtProxy, token: (r) => uncached(es, r) },
    { name: 'impersonate, JWT uncached RS256', proxy: t.jwtProxy, token: (r) => uncached(rs, r) },
  ];
}

/** Start everything, run both tables, stop everything. */
export async function runAuthBenchmarks(o: AuthBenchOptions): Promise<{ cpu: AuthCpuRow[]; latency: AuthLatencyRow[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-bench-auth-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const t = await startTopology(dir, stops, o.baselineCli ? { baselineCli: o.baselineCli } : {});
    // Each round's warm-up (its first requests) and measured requests use distinct tokens: 500 + N per round.
    const rows = await cpuRows(t, o.rounds, o.requests + 500, o.log);
    const perRound = rows.map(() => [] as number[]);
    for (let round = 0; round < o.rounds; round++) {
      for (const [k, row] of rows.entries()) {
        const us = await cpuPerRequest(row.proxy, row.token(round), o.requests, o.concurrency);
        perRound[k]!.push(us);
        o.log(`round ${round + 1}: ${row.name}: ${us.toFixed(1)} µs CPU/request`);
      }
    }
    const cpu = rows.map((r, k) => ({ name: r.name, cpuUsPerRequest: median(perRound[k]!), perRound: perRound[k]! }));

    const cachedJwt = rows.find((r) => r.name.includes('JWT cached'))!.token(0)(0)!;
    const execEs = await mintMany(t.idp, 'ES256', o.execs + 1);
    const kinds: { name: string; token: (i: number) => string }[] = [
      { name: 'exec, TokenReview cache hit', token: () => ROBOT_TOKEN },
      { name: 'exec, JWT cached', token: () => cachedJwt },
      { name: 'exec, JWT uncached ES256', token: (i) => execEs[i + 1]! }, // execEs[0]: the warm-up's
    ];
    const samples = kinds.map(() => [] as number[]);
    for (const k of kinds) await execOnce(t.jwtProxy.url, k.name.includes('uncached') ? execEs[0]! : k.token(0)); // warm
    for (let i = 0; i < o.execs; i++) for (const [k, kind] of kinds.entries()) samples[k]!.push(await execOnce(t.jwtProxy.url, kind.token(i)));
    const latency = kinds.map((k, i) => {
      const p = percentiles(samples[i]!);
      return { name: k.name, p50Ms: p.p50, p99Ms: p.p99 };
    });
    return { cpu, latency };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The two tables as text (Markdown-compatible). */
export function authTextTables(r: { cpu: AuthCpuRow[]; latency: AuthLatencyRow[] }): string {
  const hit = r.cpu.find((c) => c.name.includes('TokenReview'))?.cpuUsPerRequest ?? NaN;
  const cpu = [
    '| request (GET pods/demo, keep-alive) | proxy CPU µs/request (median) | vs TokenReview cache hit | per round |',
    '|---|---:|---:|---|',
    ...r.cpu.map((c) => `| ${c.name} | ${c.cpuUsPerRequest.toFixed(1)} | ${c.name.startsWith('impersonate') ? `${(c.cpuUsPerRequest - hit >= 0 ? '+' : '')}${(c.cpuUsPerRequest - hit).toFixed(1)}` : ''} | ${c.perRound.map((v) => v.toFixed(1)).join(', ')} |`),
  ];
  const base = r.latency.find((l) => l.name.includes('TokenReview'))?.p99Ms ?? NaN;
  const lat = [
    '| exec of `true` (WebSocket v5, sequential) | p50 ms | p99 ms | added p99 vs TokenReview |',
    '|---|---:|---:|---:|',
    ...r.latency.map((l) => `| ${l.name} | ${l.p50Ms.toFixed(2)} | ${l.p99Ms.toFixed(2)} | ${l.name.includes('TokenReview') ? '' : `${l.p99Ms - base >= 0 ? '+' : ''}${(l.p99Ms - base).toFixed(2)}`} |`),
  ];
  return `${cpu.join('\n')}\n\n${lat.join('\n')}`;
}

/** One row under callgrind. */
export interface AuthCallgrindRow {
  name: string;
  /** Median instructions (Ir) of the proxy process per request. */
  irPerRequest: number;
  perRound: number[];
}

/**
 * `--auth --callgrind`: every CPU row's instructions per request, each proxy under valgrind's
 * callgrind: warmed up, zeroed, N requests, dumped, the rows in reverse order every other round.
 * Instruction counts do not depend on the
 * machine's load, so the before/after of the passthrough path and the cached-JWT-vs-TokenReview
 * comparison are not blurred by a busy machine.
 */
export async function runAuthCallgrind(o: { requests: number; rounds: number; warmup: number; baselineCli?: string; log: (line: string) => void }): Promise<AuthCallgrindRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-bench-auth-cg-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const wrapper = (name: string): string[] => ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, `cg.${name}.%p`)}`];
    const t = await startTopology(dir, stops, { wrapper, ...(o.baselineCli ? { baselineCli: o.baselineCli } : {}) });
    const rows = await cpuRows(t, o.rounds + 1, Math.max(o.warmup, o.requests), o.log);
    const { callgrindCommand, callgrindDump } = await import('./cpu.js');
    // Warm-up: under valgrind the JIT needs many requests before a request costs what it will.
    for (const row of rows) await drive(row.proxy.url, row.token(o.rounds), o.warmup, 2);
    const perRound = rows.map(() => [] as number[]);
    for (let round = 0; round < o.rounds; round++) {
      // Every other round in reverse order, so no row is always measured first (after the longest idle).
      const order = round % 2 === 0 ? [...rows.entries()] : [...rows.entries()].reverse();
      for (const [k, row] of order) {
        await callgrindCommand(row.proxy, '--zero');
        await drive(row.proxy.url, row.token(round), o.requests, 2);
        const ir = (await callgrindDump(row.proxy, dir)) / o.requests;
        perRound[k]!.push(ir);
        o.log(`round ${round + 1}: ${row.name}: ${Math.round(ir)} Ir/request`);
      }
    }
    return rows.map((r, k) => ({ name: r.name, irPerRequest: median(perRound[k]!), perRound: perRound[k]! }));
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
