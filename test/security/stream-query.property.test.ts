/**
 * Issue 31, finding 5, as a property (fast-check): for arbitrary streaming queries — bad escapes,
 * `;`, `#`, `+`, percent-encoded non-UTF-8, empty pairs, repeated keys — sent through the proxy in
 * passthrough (SPDY, and WebSocket v5 by default), the translator (WebSocket v5 → SPDY), the
 * port-forward tunnel, kubelet mode and through an agent, either
 * the proxy refused the query with its 400 (and Go would indeed have dropped something, or read other
 * characters), or the request-target the upstream's parser received reads, in Go's `ParseQuery`,
 * exactly the values Go reads in the client's query, and those are the container and command (the
 * ports) of the session's audit line. Runs scale with FUZZ_RUNS (a multiplier, default 1).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { goParseQuery } from '../../src/wire/go-query.js';
import { STREAM_QUERY_REFUSED } from '../../src/routing/stream-query.js';
import { bodyOf, goValuesOf, startStreamRig, statusOf, type RigMode, type StreamRig } from './stream-rig.js';
import { headerOf } from './http1-request-parser.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const runs = (n: number): number => Math.max(1, Math.round(n * MULT));

/** What Node's HTTP parser lets into a request-target (printable ASCII), and the tokens that matter. */
const queryChar = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('a', 'p', 'm', 'i', 'n', '-', '.', '_', '~', '0') },
  { weight: 1, arbitrary: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 2, arbitrary: fc.constantFrom('%', '%zz', '%2', '%C3%A9', '%E2%98%BA', '%FF', '%C0%AF', '%00', '%26', '%3B', '%23', '%2B', '%3D', '+', ';', '#', '=') },
);
const text = fc.array(queryChar, { maxLength: 12 }).map((a) => a.join(''));
const pair = fc.oneof(
  fc.tuple(fc.constantFrom('container', 'command', 'stdout', 'tty', 'x', 'cont%61iner', 'command#'), fc.constantFrom('main', '', 'app', 'ma%69n', 'main#', 'main;'), fc.boolean()).map(([k, v, eq]) => (eq ? `${k}=${v}` : k)),
  fc.tuple(fc.constantFrom('container', 'command', 'x'), text).map(([k, v]) => `${k}=${v}`),
  text,
);
const rawQuery = fc.array(pair, { maxLength: 6 }).map((pairs) => ['stdout=1', 'command=sh', ...pairs].join('&'));
const portForwardQuery = fc
  .array(fc.oneof(fc.tuple(fc.constantFrom('ports', 'port%73', 'x'), text).map(([k, v]) => `${k}=${v}`), fc.constantFrom('ports=8080', 'ports=80%30', 'ports=1#', 'ports=1;2', 'ports=%zz')), { maxLength: 5 })
  .map((pairs) => ['ports=80', ...pairs].join('&'));

/** Go's values of the client's raw query, and whether the proxy must take it (Go reads it all, as UTF-8). */
function goView(raw: string): { values: Record<string, string[]>; clean: boolean } {
  const parsed = goParseQuery(Buffer.from(raw, 'latin1'));
  const values: Record<string, string[]> = {};
  let utf8 = true;
  for (const [k, v] of parsed.pairs) {
    utf8 &&= Buffer.from(k.toString('utf8')).equals(k) && Buffer.from(v.toString('utf8')).equals(v);
    (values[k.toString('utf8')] ??= []).push(v.toString('utf8'));
  }
  return { values, clean: parsed.error === undefined && utf8 };
}

const SPDY = 'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n';
const WS_V5 = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n';

const WS_TUNNEL = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n';

/**
 * The translator and the tunnel write their own SPDY request upstream: their rigs run with
 * `--upstream-streaming spdy` (issue 32: by default the WebSocket would first be passed through to this
 * upstream, which takes it, and the translator would never write a request). `upstreamUpgrade` is the
 * upgrade the upstream must then read.
 */
const TRANSLATE_HERE = { upstreamStreaming: 'spdy' } as const;
const CASES: Array<{ name: string; mode: RigMode; upgrade: string; method: string; subresource: 'exec' | 'portforward'; serveFlags?: typeof TRANSLATE_HERE; upstreamUpgrade: string }> = [
  { name: 'passthrough (SPDY)', mode: 'passthrough', upgrade: SPDY, method: 'POST', subresource: 'exec', upstreamUpgrade: 'POST SPDY/3.1' },
  { name: 'passthrough (WebSocket v5, the default)', mode: 'passthrough', upgrade: WS_V5, method: 'GET', subresource: 'exec', upstreamUpgrade: 'GET websocket' },
  { name: 'translator (WebSocket v5 → SPDY)', mode: 'passthrough', upgrade: WS_V5, method: 'GET', subresource: 'exec', serveFlags: TRANSLATE_HERE, upstreamUpgrade: 'POST SPDY/3.1' },
  { name: 'port-forward tunnel (WebSocket → SPDY)', mode: 'passthrough', upgrade: WS_TUNNEL, method: 'GET', subresource: 'portforward', serveFlags: TRANSLATE_HERE, upstreamUpgrade: 'POST SPDY/3.1' },
  { name: 'kubelet mode', mode: 'kubelet', upgrade: SPDY, method: 'POST', subresource: 'exec', upstreamUpgrade: 'POST SPDY/3.1' },
  { name: 'through an agent', mode: 'agent', upgrade: SPDY, method: 'POST', subresource: 'exec', upstreamUpgrade: 'POST SPDY/3.1' },
];

describe.each(CASES)('property: the upstream reads the values the audit read, or the query is refused — $name', ({ mode, upgrade, method, subresource, serveFlags, upstreamUpgrade }) => {
  let rig: StreamRig;
  let n = 0;
  beforeAll(async () => {
    rig = await startStreamRig(mode, serveFlags ? { serveFlags } : {});
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('holds for arbitrary queries', async () => {
    const seenCount = { refused: 0, compared: 0 };
    await fc.assert(
      fc.asyncProperty(subresource === 'exec' ? rawQuery : portForwardQuery, async (raw) => {
        const pod = `p${++n}`;
        const answer = await rig.send(`${method} ${rig.prefix}/api/v1/namespaces/default/pods/${pod}/${subresource}?${raw} HTTP/1.1\r\nHost: proxy\r\n${rig.auth}${upgrade}\r\n`, (b) => b.includes('\r\n\r\n'));
        const go = goView(raw);
        const seen = rig.streamUpstream.requests.find((r) => r.path.includes(`/${pod}/`));
        const refused = statusOf(answer) === 400 && String(bodyOf(answer)?.message ?? '').startsWith(STREAM_QUERY_REFUSED);
        expect(refused, `answer ${answer.toString('latin1').slice(0, 300)}`).toBe(!go.clean);
        if (refused) {
          expect(seen).toBeUndefined();
          seenCount.refused++;
          return;
        }
        if (!seen) return; // refused for another reason (a container the pod lacks in kubelet mode): nothing to compare
        // The path the case names wrote this request.
        expect(`${seen.method} ${headerOf(seen, 'upgrade')}`).toBe(upstreamUpgrade);
        const audit = await rig.auditOf(pod);
        const upstream = goValuesOf(seen.target);
        seenCount.compared++;
        if (mode === 'kubelet') {
          // kube-apiserver's kubelet path: the container in the path, the command in the kubelet's query.
          const container = seen.path.split('/')[4];
          expect(container).toBe(audit.container === undefined || audit.container === '' ? 'main' : audit.container);
          expect(upstream.command ?? []).toEqual(audit.command ?? []);
          expect(upstream.command ?? []).toEqual(go.values.command ?? []);
          return;
        }
        // The upstream reads what Go reads in the client's query: nothing dropped, nothing added...
        expect(upstream).toEqual(go.values);
        if (subresource === 'portforward') {
          expect(audit.ports).toEqual(upstream.ports);
          return;
        }
        // ...and the audit line read the same container and command.
        expect({ container: audit.container, command: audit.command ?? [] }).toEqual({ container: upstream.container?.[0], command: upstream.command ?? [] });
      }),
      { numRuns: runs(40) },
    );
    // Not vacuous: both outcomes happened.
    expect(seenCount.refused).toBeGreaterThan(0);
    expect(seenCount.compared).toBeGreaterThan(0);
  }, 120_000);
});
