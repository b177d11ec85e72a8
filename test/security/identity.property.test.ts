/**
 * The identity property of issue 31 (finding 1), on the wire: a TokenReview names a user with
 * arbitrary Unicode in its name, uid, groups and extra keys and values; the caller then makes a plain
 * request, a SPDY exec upgrade, a WebSocket v5 exec and a port-forward WebSocket tunnel (passed through
 * to an upstream that takes them; toward a kubelet that does not, translated and unwrapped to a SPDY
 * POST), through the proxy in every mode; and the same upgrades to a target whose upstream refuses
 * every upgrade (`REFUSE_UPGRADES`), so each is followed by the proxy's planned fallback (issue 32):
 * v5 translated and the tunnel unwrapped to a SPDY POST, a SPDY exec or port-forward reverse-translated
 * to a WebSocket GET — every head writer of the proxy. An upstream that reads heads as Go's net/http
 * does (`http1-request-parser.ts`: lines end at LF, values trimmed and checked by
 * `ValidHeaderFieldValue`) must see, for each call, either:
 *
 * - exactly the attempts the call makes (one request; two for a refused upgrade and its fallback, one
 *   toward a kubelet, which is never asked twice), each of whose identity lines (`Impersonate-*` toward
 *   an apiserver, `X-Remote-*` toward an aggregated API, none toward a kubelet) decode as UTF-8 to
 *   exactly the reviewed values (extra keys percent-decoded as kube-apiserver decodes them), and no
 *   other identity line; or
 * - nothing, when the identity holds a control character (C0, DEL, C1), a space at either end or a
 *   lone surrogate — and the caller got 401.
 *
 * Before issue 31 the upgrade paths wrote the head with `Buffer.from(head, 'latin1')`: `č` U+010D and
 * `Ċ` U+010A became CR LF and added any header (`Impersonate-Group: system:masters`), `š` became `a`.
 * In passthrough the caller's own `Impersonate-*` bytes must arrive unchanged. Runs scale with
 * FUZZ_RUNS (a multiplier, default 1).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmugglingRig, type SmugglingMode, type SmugglingRig } from './smuggling-fixture.js';
import { headerOf } from './http1-request-parser.js';
import { isReviewOrLookup, REFUSE_UPGRADES, type ReviewedUser, type SeenRequest } from './pipelined-upstream.js';

const MULT = Number(process.env.FUZZ_RUNS ?? '1') || 1;
const RUNS = Math.max(1, Math.round(12 * MULT));

type Call = 'plain' | 'spdy' | 'v5' | 'tunnel' | 'v5-refused' | 'tunnel-refused' | 'spdy-refused' | 'spdy-portforward-refused';
const CALLS: readonly Call[] = ['plain', 'spdy', 'v5', 'tunnel', 'v5-refused', 'tunnel-refused', 'spdy-refused', 'spdy-portforward-refused'];

/** The requests a call makes upstream: a refused upgrade and its planned fallback, but toward a kubelet one attempt only. */
function attemptsOf(call: Call, mode: SmugglingMode): number {
  return call.endsWith('-refused') && mode !== 'kubelet' ? 2 : 1;
}

/** Strings an attacker would pick, beside arbitrary code points (lone surrogates included). */
const HOSTILE = [
  'x\u010d\u010aImpersonate-Group: system:masters',
  'x\u010aImpersonate-Group: system:masters',
  '\u0161dmin',
  'Jos\u00e9',
  'Jos\u00c3\u00a9',
  'a\u0085b',
  'a\u009b31mb',
  '\u00a0admin',
  ' admin',
  'admin ',
  'a\tb',
  'a\u2028b',
  '\ud800',
  '\udfff\ud800',
  'system:masters',
  '%0d%0aX: y',
  '\u{1f469}\u200d\u{1f4bb}',
];
const text = (min = 0): fc.Arbitrary<string> =>
  fc.oneof({ weight: 3, arbitrary: fc.string({ unit: 'binary', minLength: min, maxLength: 10 }) }, { weight: 2, arbitrary: fc.constantFrom(...HOSTILE) });

const reviewedUser: fc.Arbitrary<ReviewedUser> = fc.record({
  username: text(1),
  uid: fc.oneof(fc.constant(''), text(1)),
  groups: fc.array(text(1), { maxLength: 3 }),
  extra: fc.dictionary(text(1), fc.array(text(), { minLength: 1, maxLength: 2 }), { maxKeys: 2 }),
});

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE = /\p{Surrogate}/u;
/** What the proxy must refuse (401): a control character, a space at an end, a lone surrogate. */
function unfit(v: string): boolean {
  return CONTROL.test(v) || LONE.test(v) || v.startsWith(' ') || v.endsWith(' ');
}

/** The user the proxy holds after the TokenReview (extra keys lower-cased, `system:authenticated` added). */
function expectedUser(u: ReviewedUser): { username: string; uid: string; groups: string[]; extra: Record<string, string[]>; refused: boolean } {
  const extra: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(u.extra ?? {})) extra[k.toLowerCase()] = v;
  const groups = [...(u.groups ?? [])];
  if (!groups.includes('system:authenticated')) groups.push('system:authenticated');
  const values = [u.username, u.uid ?? '', ...groups, ...Object.keys(extra), ...Object.values(extra).flat()];
  return { username: u.username, uid: u.uid ?? '', groups, extra, refused: values.some(unfit) };
}

/** A header value's bytes (the parser keeps them as latin1) read as UTF-8, exactly, or a marker. */
function utf8(v: string): string {
  const bytes = Buffer.from(v, 'latin1');
  const s = bytes.toString('utf8');
  return Buffer.from(s, 'utf8').equals(bytes) ? s : `<not UTF-8: ${bytes.toString('hex')}>`;
}

/** `url.PathUnescape` of a lower-cased header-name suffix, as kube-apiserver reads an extra key. */
function extraKeyOf(suffix: string): string {
  return Buffer.from(suffix.toLowerCase().replace(/%([0-9a-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');
}

/** The identity one request carried: `Impersonate-*` or `X-Remote-*` lines, decoded. */
function identityOf(r: SeenRequest, prefix: 'Impersonate-' | 'X-Remote-'): { user: string[]; uid: string[]; groups: string[]; extra: Record<string, string[]>; other: string[] } {
  const id = { user: [] as string[], uid: [] as string[], groups: [] as string[], extra: {} as Record<string, string[]>, other: [] as string[] };
  const p = prefix.toLowerCase();
  for (const [name, value] of r.headers) {
    const lower = name.toLowerCase();
    if (lower.startsWith('impersonate-') && p !== 'impersonate-') id.other.push(name);
    if (lower.startsWith('x-remote-') && p !== 'x-remote-') id.other.push(name);
    if (!lower.startsWith(p)) continue;
    const rest = lower.slice(p.length);
    if (rest === 'user') id.user.push(utf8(value));
    else if (rest === 'uid') id.uid.push(utf8(value));
    else if (rest === 'group') id.groups.push(utf8(value));
    else if (rest.startsWith('extra-')) (id.extra[extraKeyOf(name.slice(p.length + 6))] ??= []).push(utf8(value));
    else id.other.push(name);
  }
  return id;
}

const WS_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** The bytes of one call (tagged so it is found upstream whatever path it took). */
function callBytes(rig: SmugglingRig, call: Call, tag: string, credential: string): string {
  const auth = credential;
  const pod = `${rig.prefix}/api/v1/namespaces/default/pods/demo`;
  const aggregated = rig.mode === 'aggregated';
  switch (call) {
    case 'plain':
      return `GET ${aggregated ? '/apis/things.example.com/v1/namespaces/default/widgets' : `${rig.prefix}/api/v1/namespaces/default/pods`}?${tag} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: close\r\n\r\n`;
    case 'spdy':
      // Toward an aggregated API: an upgrade on its path (a WebSocket watch), passed through upgrade-aware.
      if (aggregated) return `GET /apis/things.example.com/v1/namespaces/default/widgets?watch=1&${tag} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${WS_KEY}\r\n\r\n`;
      return `POST ${pod}/exec?command=x&stdout=1&${tag} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n`;
    case 'v5':
      return `GET ${pod}/exec?command=x&stdout=1&${tag} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${WS_KEY}\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n`;
    case 'tunnel':
      return `GET ${pod}/portforward?ports=80&${tag} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${WS_KEY}\r\nSec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n`;
    // The same upgrades to pods (an aggregated API's too) whose upstream refuses every upgrade: each is
    // followed by the proxy's fallback in the other protocol, refused as well.
    case 'v5-refused':
      return callBytes(rig, 'v5', `${tag}&${REFUSE_UPGRADES}=1`, credential);
    case 'tunnel-refused':
      return callBytes(rig, 'tunnel', `${tag}&${REFUSE_UPGRADES}=1`, credential);
    case 'spdy-refused':
      return `POST ${pod}/exec?command=x&stdout=1&${tag}&${REFUSE_UPGRADES}=1 HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n`;
    case 'spdy-portforward-refused':
      return `POST ${pod}/portforward?ports=80&${tag}&${REFUSE_UPGRADES}=1 HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n`;
  }
}

/**
 * The caller requests every upstream of the rig read while `send` ran (calls are sequential; a
 * kubelet's request-target is rebuilt from the pod's options, so a query tag would not survive it).
 */
async function during(rig: SmugglingRig, send: () => Promise<Buffer>): Promise<{ answer: Buffer; seen: SeenRequest[] }> {
  const before = rig.upstreams.map((u) => u.requests.length);
  const answer = await send();
  // The proxy's own calls are not the caller's: reviews, lookups, and the aggregator's discovery documents.
  const discovery = (r: SeenRequest): boolean => r.method === 'GET' && /^\/(api|apis)(\/[^/]+){0,2}$/.test(r.path);
  const seen = rig.upstreams.flatMap((u, i) => u.requests.slice(before[i]!)).filter((r) => !isReviewOrLookup(r) && !discovery(r));
  return { answer, seen };
}

/** Close once a complete response head has arrived (the upgraded stream's later bytes do not matter here). */
const headArrived = (b: Buffer): boolean => b.includes('\r\n\r\n');

let serial = 0;

describe.each(['impersonate', 'aggregated', 'kubelet', 'agent'] as SmugglingMode[])('identity bytes upstream (%s)', (mode) => {
  let rig: SmugglingRig;
  beforeAll(async () => {
    rig = await startSmugglingRig(mode);
  }, 60_000);
  afterAll(async () => {
    await rig?.close();
  });

  it('each call: its attempts (one; a refused upgrade and its fallback), each with identity lines exactly the reviewed values as UTF-8, or 401 and nothing upstream', async () => {
    await fc.assert(
      fc.asyncProperty(reviewedUser, fc.constantFrom(...CALLS), async (user, call) => {
        const n = ++serial;
        const token = `identity-token-${mode}-${n}`;
        rig.tokens[token] = user;
        const tag = `idcase=${n}`;
        const { answer, seen } = await during(rig, () => rig.send(callBytes(rig, call, tag, `Authorization: Bearer ${token}\r\n`), { closeWhen: headArrived }));
        const expected = expectedUser(user);
        if (expected.refused) {
          expect(answer.toString('latin1').slice(0, 12), `${call}: status`).toBe('HTTP/1.1 401');
          expect(seen.map((x) => `${x.method} ${x.target}`), `${call}: nothing upstream`).toEqual([]);
          return;
        }
        const attempts = attemptsOf(call, mode);
        expect(seen, `${call}: ${attempts} request(s) upstream (${seen.map((x) => `${x.method} ${x.target}`).join(', ')}); the caller got ${JSON.stringify(answer.toString('latin1').slice(0, 200))}`).toHaveLength(attempts);
        // A fallback is the other protocol's upgrade to the same target.
        if (attempts === 2) {
          const path = seen[0]!.target.split('?')[0];
          const upgrades = call.startsWith('spdy') ? ['spdy/3.1', 'websocket'] : ['websocket', 'spdy/3.1'];
          expect(seen.map((x) => `${x.target.split('?')[0]} ${headerOf(x, 'upgrade')?.toLowerCase()}`), call).toEqual(upgrades.map((u) => `${path} ${u}`));
        }
        expect(rig.upstreams.every((u) => u.anomalies.size === 0), 'no upstream read bytes it could not parse').toBe(true);
        // Where the identity goes: X-Remote-* to the aggregated API (its plain request and its upgrade),
        // none to a kubelet (pod streams in kubelet mode), Impersonate-* to an apiserver.
        const toKubelet = mode === 'kubelet' && call !== 'plain';
        const toAggregated = mode === 'aggregated' && (call === 'plain' || call === 'spdy');
        for (const r of seen) {
          const identity = identityOf(r, toAggregated ? 'X-Remote-' : 'Impersonate-');
          expect(identity.other, `${call} ${r.method}: no other identity line`).toEqual([]);
          if (toKubelet) {
            expect(identity, 'a kubelet gets no identity lines').toEqual({ user: [], uid: [], groups: [], extra: {}, other: [] });
            continue;
          }
          expect(identity.user, `${call} ${r.method}`).toEqual([expected.username]);
          expect(identity.uid, `${call} ${r.method}`).toEqual(expected.uid === '' ? [] : [expected.uid]);
          expect(identity.groups, `${call} ${r.method}`).toEqual(expected.groups);
          expect(identity.extra, `${call} ${r.method}`).toEqual(expected.extra);
        }
      }),
      { numRuns: RUNS * CALLS.length },
    );
  }, 240_000);
});

describe('identity bytes upstream (passthrough): the caller’s own Impersonate-* lines arrive as the very bytes it sent', () => {
  let rig: SmugglingRig;
  beforeAll(async () => {
    rig = await startSmugglingRig('passthrough');
  }, 60_000);
  afterAll(async () => {
    await rig?.close();
  });

  // Printable in a header line: no C0 and no DEL (those are the framing property's subject), a space
  // at neither end (every parser trims it).
  // eslint-disable-next-line no-control-regex
  const printable = text(1).filter((v) => !/[\u0000-\u001f\u007f]/.test(v) && !LONE.test(v) && v.trim() === v && v !== '');

  it('each call', async () => {
    await fc.assert(
      fc.asyncProperty(printable, fc.array(printable, { maxLength: 2 }), fc.constantFrom(...CALLS), async (user, groups, call) => {
        const n = ++serial;
        const tag = `idcase=${n}`;
        const lines = [`Impersonate-User: ${Buffer.from(user, 'utf8').toString('latin1')}`, ...groups.map((g) => `Impersonate-Group: ${Buffer.from(g, 'utf8').toString('latin1')}`)];
        const bytes = Buffer.from(callBytes(rig, call, tag, `Authorization: Bearer caller-token\r\n${lines.join('\r\n')}\r\n`), 'latin1');
        const { seen } = await during(rig, () => rig.send(bytes, { closeWhen: headArrived }));
        expect(seen, `${call}: ${attemptsOf(call, 'passthrough')} request(s) upstream`).toHaveLength(attemptsOf(call, 'passthrough'));
        for (const r of seen) {
          const identity = identityOf(r, 'Impersonate-');
          expect(identity.user, `${call} ${r.method}`).toEqual([user]);
          expect(identity.groups, `${call} ${r.method}`).toEqual(groups);
        }
      }),
      { numRuns: RUNS * CALLS.length },
    );
  }, 240_000);
});
