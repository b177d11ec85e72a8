/**
 * Issue 31, finding 4: the kubelet's streaming endpoints through kube-apiserver's node proxy
 * (`/api/v1/nodes/NODE/proxy/{exec,attach,run,portForward,cri}/…`) run commands in any pod of the
 * node. kube-apiserver authorizes them as `nodes/proxy` with the verb of the method, so a WebSocket
 * upgrade (a GET) needs only `get nodes/proxy`; and the catch-all relayed them past the recording
 * policy. Asserted on what the upstream's parser received (nothing, or the request) and on the
 * SubjectAccessReviews it answered.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headerOf } from './http1-request-parser.js';
import type { Answer, SeenRequest } from './pipelined-upstream.js';
import { bodyOf, startStreamRig, statusOf, TOKENS, type ReviewedAttributes, type StreamRig } from './stream-rig.js';

/** The upstream stands in for kube-apiserver relaying to the kubelet: node-proxy upgrades get their 101. */
function nodeProxyAnswer(r: SeenRequest): Answer | undefined {
  if (!r.upgrade || !r.path.includes('/proxy/')) return undefined;
  if ((headerOf(r, 'upgrade') ?? '').toLowerCase() !== 'websocket') return { switchProtocols: { Connection: 'Upgrade', Upgrade: 'SPDY/3.1', 'X-Stream-Protocol-Version': 'v4.channel.k8s.io' } };
  const accept = createHash('sha1').update(`${headerOf(r, 'sec-websocket-key') ?? ''}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  return { switchProtocols: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Accept': accept, 'Sec-WebSocket-Protocol': 'v4.channel.k8s.io' } };
}

const WEBSOCKET = 'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n';
const SPDY = 'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n';
const headDone = (b: Buffer): boolean => b.includes('\r\n\r\n');

/** Every way of naming the kubelet's exec endpoint of pod default/demo through node-1's proxy. */
const EXEC_FORMS = [
  '/api/v1/nodes/node-1/proxy/exec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/exec/default/demo/pod-uid/main',
  '/api/v1/nodes/node-1/proxy/%65xec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/./exec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/x/../exec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/../exec/default/demo/main',
  '/api/v1/nodes/node-1/proxy//exec//default/demo/main/',
  '/api/v1/nodes/node-1/proxy%2Fexec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/EXEC/default/demo/main',
  '/api/v1//nodes/node-1/proxy/exec/default/demo/main',
  '/api/v1/nodes/node-1/proxy/attach/default/demo/main',
];

describe('finding 4: kubelet streams through nodes/proxy are reviewed as `create` (impersonate)', () => {
  for (const mode of ['impersonate', 'agent'] as const) {
    describe(mode, () => {
      let rig: StreamRig;
      beforeAll(async () => {
        // viewer has `get nodes/proxy` (a monitoring agent's permission), not `create`.
        rig = await startStreamRig(mode, {
          allow: (user: string, a: ReviewedAttributes) => user === 'alice' || !(a.resource === 'nodes' && a.subresource === 'proxy' && a.verb === 'create'),
          answer: nodeProxyAnswer,
        });
      });
      afterAll(async () => {
        await rig?.close();
      });
      const as = (user: keyof typeof TOKENS): string => `Authorization: Bearer ${TOKENS[user]}\r\n`;

      it.each(EXEC_FORMS)('a WebSocket GET to %s needs `create nodes/proxy`: 403 before anything goes upstream', async (path) => {
        const seen = rig.upstream.requests.length;
        const answer = await rig.send(`GET ${rig.prefix}${path}?command=id&output=1 HTTP/1.1\r\nHost: proxy\r\n${as('viewer')}${WEBSOCKET}\r\n`, headDone);
        const reviews = rig.reviews().filter((r) => r.user === 'viewer');
        expect(reviews.at(-1)?.attributes).toMatchObject({ verb: 'create', resource: 'nodes', subresource: 'proxy', name: 'node-1' });
        expect(statusOf(answer)).toBe(403);
        expect(bodyOf(answer)).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden', message: expect.stringContaining('cannot create resource "nodes/proxy"') });
        expect(rig.upstream.requests.slice(seen).filter((r) => r.path.includes('/proxy'))).toEqual([]);
      });

      it.each([
        ['node-1:10250', 'GET', '/exec/default/demo/main?command=id&output=1', WEBSOCKET],
        ['https:node-1:10250', 'GET', '/portForward/default/demo?port=80', WEBSOCKET],
        ['node-1', 'POST', '/run/default/demo/main?cmd=id', 'Content-Length: 0\r\n'],
        ['node-1', 'GET', '/cri/exec/Tok3n', WEBSOCKET],
      ])('the node named %s, %s …%s: reviewed as the apiserver names it, refused', async (node, method, rest, extra) => {
        const seen = rig.upstream.requests.length;
        const answer = await rig.send(`${method} ${rig.prefix}/api/v1/nodes/${node}/proxy${rest} HTTP/1.1\r\nHost: proxy\r\n${as('viewer')}${extra}Connection: close\r\n\r\n`, headDone);
        expect(rig.reviews().filter((r) => r.user === 'viewer').at(-1)?.attributes).toMatchObject({ verb: 'create', resource: 'nodes', subresource: 'proxy', name: node });
        expect(statusOf(answer)).toBe(403);
        expect(rig.upstream.requests.slice(seen).filter((r) => r.path.includes('/proxy'))).toEqual([]);
      });

      it('a caller with `create nodes/proxy` is relayed; a GET of /containerLogs (no command) needs no extra review', async () => {
        const exec = await rig.send(`GET ${rig.prefix}/api/v1/nodes/node-1/proxy/exec/default/demo/main?command=id&output=1 HTTP/1.1\r\nHost: proxy\r\n${as('alice')}${WEBSOCKET}\r\n`, headDone);
        expect(statusOf(exec)).toBe(101);
        const before = rig.reviews().length;
        const logs = await rig.send(`GET ${rig.prefix}/api/v1/nodes/node-1/proxy/containerLogs/default/demo/main HTTP/1.1\r\nHost: proxy\r\n${as('viewer')}Connection: close\r\n\r\n`);
        expect(statusOf(logs)).toBe(200);
        expect(rig.reviews().slice(before).filter((r) => r.attributes.resource === 'nodes')).toEqual([]);
        expect(rig.upstream.requests.some((r) => r.path === '/api/v1/nodes/node-1/proxy/containerLogs/default/demo/main')).toBe(true);
      });
    });
  }
});

/** Recorded: namespace default (enforce) and other (fail open); kube-system exempt; anything else not recorded. */
const POLICY = `apiVersion: kube-stream-proxy.io/v1alpha1
kind: SessionRecordingConfiguration
rules:
- name: system-exempt
  match: {namespaces: [kube-system]}
  record: none
- name: default-enforced
  match: {namespaces: [default]}
  record: output
  enforce: true
- name: other-fail-open
  match: {namespaces: [other]}
  record: output
`;

describe('finding 4: a kubelet stream the recording policy would record is refused on the node-proxy path', () => {
  for (const mode of ['passthrough', 'agent'] as const) {
    describe(mode, () => {
      let rig: StreamRig;
      beforeAll(async () => {
        rig = await startStreamRig(mode, { recordingPolicy: POLICY, answer: nodeProxyAnswer });
      });
      afterAll(async () => {
        await rig?.close();
      });
      const send = (method: string, path: string, extra: string): Promise<Buffer> =>
        rig.send(`${method} ${rig.prefix}${path} HTTP/1.1\r\nHost: proxy\r\n${rig.auth}${extra}Connection: close\r\n\r\n`, headDone);

      it.each([
        ...EXEC_FORMS.map((p) => ({ method: 'GET', path: `${p}?command=id&output=1`, extra: WEBSOCKET, route: p.includes('/attach/') ? 'pods/attach' : 'pods/exec' })),
        { method: 'POST', path: '/api/v1/nodes/node-1/proxy/exec/default/demo/main?command=id&output=1', extra: SPDY, route: 'pods/exec' },
        { method: 'POST', path: '/api/v1/nodes/node-1:10250/proxy/run/default/demo/main?cmd=id', extra: 'Content-Length: 0\r\n', route: 'pods/exec' },
        { method: 'GET', path: '/api/v1/nodes/node-1/proxy/portForward/default/demo?port=80', extra: WEBSOCKET, route: 'pods/portforward' },
        { method: 'GET', path: '/api/v1/nodes/node-1/proxy/exec/other/demo/main?command=id&output=1', extra: WEBSOCKET, route: 'pods/exec' },
        { method: 'GET', path: '/api/v1/nodes/node-1/proxy/cri/exec/Tok3n', extra: WEBSOCKET, route: 'pods/exec' },
      ])('$method $path → 403 naming $route, nothing upstream', async ({ method, path, extra, route }) => {
        const seen = rig.upstream.requests.length;
        const answer = await send(method, path, extra);
        expect(rig.upstream.requests.slice(seen).filter((r) => r.path.includes('/proxy'))).toEqual([]);
        expect(statusOf(answer)).toBe(403);
        const status = bodyOf(answer);
        expect(status).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden', details: { kind: 'nodes' } });
        expect(status.message).toContain(route);
        expect(status.message).toContain('recorded');
      });

      it.each([
        ['GET', '/api/v1/nodes/node-1/proxy/exec/kube-system/demo/main?command=id&output=1', WEBSOCKET, 101],
        ['GET', '/api/v1/nodes/node-1/proxy/exec/unrecorded/demo/main?command=id&output=1', WEBSOCKET, 101],
        ['GET', '/api/v1/nodes/node-1/proxy/containerLogs/default/demo/main', '', 200],
        ['GET', '/api/v1/nodes/node-1/proxy/metrics/resource', '', 200],
      ])('%s %s: not recorded by the policy, relayed', async (method, path, extra, code) => {
        const answer = await send(method, path, extra);
        expect(statusOf(answer)).toBe(code);
        expect(rig.upstream.requests.some((r) => r.target === path)).toBe(true);
      });
    });
  }
});
