/**
 * The dev cluster authenticates a browser's bearer token sent as the
 * `base64url.bearer.authorization.k8s.io.<token>` WebSocket subprotocol, as kube-apiserver's
 * `websocket.ProtocolAuthenticator` does: on WebSocket upgrades only, unpadded base64url, valid UTF-8,
 * one token at most, another protocol required; the token entry is taken out of the list, so the
 * answer never echoes it.
 */
import type { IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { isCompleteAnswer, parseAnswer, RawClient } from '../../proxy/scripted-upstream.js';

const POLICY = { rules: [{ users: ['alice'], verbs: ['get', 'create'], resources: ['pods', 'pods/exec', 'pods/attach', 'pods/portforward'] }] };
const TOKEN = 'alice-token';
const bearer = (token: string, encoding: BufferEncoding = 'base64url'): string => `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString(encoding)}`;

let dir: string;
let cluster: DevCluster;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-cluster-ws-bearer-'));
  writeFileSync(join(dir, 'tokens.csv'), `${TOKEN},alice,uid-alice\nviewer-token,viewer,uid-viewer\n`);
  writeFileSync(join(dir, 'policy.json'), JSON.stringify(POLICY));
  cluster = await startDevCluster({ dataDir: join(dir, 'pods'), tokenAuthFile: join(dir, 'tokens.csv'), authorizationPolicyFile: join(dir, 'policy.json') });
});
afterAll(async () => {
  await cluster?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Open a WebSocket to the dev cluster; resolves with the 101's subprotocol and what arrived, or the refusal. */
function open(path: string, protocols: string[]): Promise<{ status: number; protocol?: string; answered?: string; body?: string; output: string }> {
  const ws = new WebSocket(`${cluster.url.replace(/^http/, 'ws')}${path}`, protocols);
  return new Promise((resolve) => {
    let output = '';
    let answered: string | undefined;
    ws.on('upgrade', (res: IncomingMessage) => (answered = String(res.headers['sec-websocket-protocol'])));
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode!, body, output });
        ws.terminate();
      });
    });
    ws.on('message', (d: Buffer) => {
      if (d[0] === 1) output += d.subarray(1).toString();
    });
    ws.on('open', () => {
      if (!path.includes('/exec')) ws.close();
    });
    ws.on('error', () => undefined);
    ws.on('close', () => resolve({ status: 101, protocol: ws.protocol, ...(answered !== undefined ? { answered } : {}), output }));
  });
}

const EXEC = '/api/v1/namespaces/default/pods/demo/exec?command=echo&command=hi&stdout=true';

describe('dev cluster: a bearer token in the WebSocket subprotocol list', () => {
  it('exec: authenticated as its user, the token stripped before the handler and never echoed', async () => {
    const seen = cluster.requests.length;
    const r = await open(EXEC, [bearer(TOKEN), 'v4.channel.k8s.io']);
    expect(r).toEqual({ status: 101, protocol: 'v4.channel.k8s.io', answered: 'v4.channel.k8s.io', output: 'hi\n' });
    const arrived = cluster.requests.slice(seen);
    expect(arrived).toHaveLength(1);
    // The request log shows what arrived (the token), and the user it authenticated as.
    expect(arrived[0]!.headers['sec-websocket-protocol']).toBe(`${bearer(TOKEN)},v4.channel.k8s.io`);
    expect(arrived[0]!.user).toBe('alice');
  });

  it.each([
    ['attach', '/api/v1/namespaces/default/pods/demo/attach?stdout=true', 'v4.channel.k8s.io'],
    ['portforward', '/api/v1/namespaces/default/pods/demo/portforward?ports=80', 'v4.channel.k8s.io'],
  ])('%s: upgraded with the other protocol, the token not echoed', async (_name, path, protocol) => {
    const r = await open(path, [protocol, bearer(TOKEN)]);
    expect(r).toMatchObject({ status: 101, protocol, answered: protocol });
  });

  it('the Authorization header still works, and wins over a bad subprotocol token (the union tries it first)', async () => {
    const ws = new WebSocket(`${cluster.url.replace(/^http/, 'ws')}${EXEC}`, [bearer('wrong'), 'v4.channel.k8s.io'], { headers: { Authorization: `Bearer ${TOKEN}` } });
    const code = await new Promise<number>((resolve) => {
      ws.on('open', () => resolve(101));
      ws.on('unexpected-response', (_q, res: IncomingMessage) => resolve(res.statusCode!));
      ws.on('error', () => undefined);
    });
    ws.terminate();
    expect(code).toBe(101);
  });

  it.each([
    ['an unknown token', [bearer('wrong'), 'v4.channel.k8s.io']],
    ['padded base64', [`base64url.bearer.authorization.k8s.io.${Buffer.from('alice-toke').toString('base64')}`, 'v4.channel.k8s.io']],
    ['standard base64 alphabet', [`base64url.bearer.authorization.k8s.io.${Buffer.from('\u00fb\u00ff').toString('base64').replace(/=+$/, '')}+/`, 'v4.channel.k8s.io']],
    ['invalid UTF-8', [`base64url.bearer.authorization.k8s.io.${Buffer.from([0xff, 0xfe]).toString('base64url')}`, 'v4.channel.k8s.io']],
    ['two tokens', [bearer(TOKEN), bearer(TOKEN), 'v4.channel.k8s.io']],
    ['no other protocol', [bearer(TOKEN)]],
  ])('%s → 401 Unauthorized', async (_name, protocols) => {
    // A raw handshake: ws's client refuses to offer some of these lists itself.
    const client = await RawClient.connect(cluster.url, { timeoutMs: 10_000 });
    client.write(
      `GET ${EXEC} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: ${protocols.join(', ')}\r\n\r\n`,
    );
    const answer = parseAnswer(await client.until(isCompleteAnswer, 'the answer'));
    client.destroy();
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body.toString())).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
  });

  it('is read on WebSocket upgrades only: a SPDY upgrade carrying the protocol line is 401', async () => {
    const client = await RawClient.connect(cluster.url, { timeoutMs: 10_000 });
    client.write(
      'POST /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
        `X-Stream-Protocol-Version: v4.channel.k8s.io\r\nSec-WebSocket-Protocol: ${bearer(TOKEN)}, v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n`,
    );
    const answer = (await client.until((b) => b.includes('}'), 'the answer')).toString('latin1');
    client.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
  });
});
