/**
 * Start-up options of the dev cluster: the CLI flags, refusals of bad files before anything
 * listens, and the request log of a cluster without authentication.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDevClusterArgs } from '../../../dev/cluster/command.js';
import { startDevCluster } from '../../../dev/cluster/dev-cluster.js';
import type { RecordedRequest } from '../../../dev/cluster/request-log.js';
import { createTestPki, type TestPki } from '../../helpers/certs.js';

let dir: string;
let pki: TestPki;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dev-cluster-options-'));
  pki = await createTestPki(dir);
  writeFileSync(join(dir, 'tokens.csv'), 't,alice,1\n');
  writeFileSync(join(dir, 'bad-tokens.csv'), 't,alice\n');
  writeFileSync(join(dir, 'policy.json'), '{"rules":[]}');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('dev-cluster CLI flags', () => {
  it('maps every flag to an option, reading the PEM files', () => {
    const args = parseDevClusterArgs([
      '--listen', '127.0.0.1:0',
      '--tls-cert-file', pki.server.certFile,
      '--tls-private-key-file', pki.server.keyFile,
      '--token-auth-file', join(dir, 'tokens.csv'),
      '--authorization-policy-file', join(dir, 'policy.json'),
      '--kubelet-port', '0',
      '--kubelet-tls-cert-file', pki.server.certFile,
      '--kubelet-tls-private-key-file', pki.server.keyFile,
      '--kubelet-client-ca-file', pki.ca.certFile,
      '--pod', 'web',
      '--apiserver-version', 'v1.36.1',
      '--kubelet-version', '1.35',
      '--refuse-websocket-streaming',
      '--refuse-spdy-streaming',
    ]);
    expect(args).toEqual({
      help: false,
      kubeconfig: undefined,
      options: {
        host: '127.0.0.1',
        port: 0,
        pods: ['web'],
        dataDir: undefined,
        tls: { cert: pki.server.cert, key: pki.server.key },
        tokenAuthFile: join(dir, 'tokens.csv'),
        authorizationPolicyFile: join(dir, 'policy.json'),
        kubelet: { port: 0, tls: { cert: pki.server.cert, key: pki.server.key }, clientCa: pki.ca.cert },
        apiserverVersion: 'v1.36.1',
        kubeletVersion: '1.35',
        refuseWebSocketStreaming: true,
        refuseSpdyStreaming: true,
      },
    });
  });

  it('defaults the kubelet port to 10250 and leaves security off without flags', () => {
    const withKubelet = parseDevClusterArgs([
      '--kubelet-tls-cert-file', pki.server.certFile, '--kubelet-tls-private-key-file', pki.server.keyFile, '--kubelet-client-ca-file', pki.ca.certFile,
    ]);
    expect(withKubelet.help === false && withKubelet.options.kubelet?.port).toBe(10250);
    const plain = parseDevClusterArgs([]);
    expect(plain).toEqual({ help: false, kubeconfig: undefined, options: { host: '127.0.0.1', port: 6444, pods: [], dataDir: undefined } });
    expect(parseDevClusterArgs(['-h'])).toEqual({ help: true });
  });

  it.each([
    [['--tls-cert-file', 'x'], '--tls-cert-file and --tls-private-key-file must be given together'],
    [['--authorization-policy-file', 'p.json'], '--authorization-policy-file needs --token-auth-file'],
    [['--kubelet-port', '1'], 'the kubelet listener needs --kubelet-tls-cert-file, --kubelet-tls-private-key-file and --kubelet-client-ca-file'],
    [['--bogus'], "Unknown option '--bogus'"],
    [['--kubelet-version', '1.40'], '--kubelet-version: want a Kubernetes version 1.20 to 1.38 (e.g. 1.35 or v1.35.0), got "1.40"'],
    [['--apiserver-version', 'latest'], '--apiserver-version: want a Kubernetes version 1.20 to 1.38 (e.g. 1.35 or v1.35.0), got "latest"'],
    [['--apiserver-version', '1.35', '--kubelet-version', '1.36'], '--kubelet-version 1.36 is newer than --apiserver-version 1.35: a kubelet may not be newer than its kube-apiserver'],
  ])('refuses %j', (argv, message) => {
    expect(() => parseDevClusterArgs(argv)).toThrow(message);
  });
});

describe('start-up refusals', () => {
  it('refuses a bad version before anything listens', async () => {
    await expect(startDevCluster({ apiserverVersion: '1.29', kubeletVersion: '1.36' })).rejects.toThrow('kubeletVersion 1.36 is newer than apiserverVersion 1.29');
  });
  it('refuses a policy without token authentication', async () => {
    await expect(startDevCluster({ authorizationPolicyFile: join(dir, 'policy.json') })).rejects.toThrow('authorizationPolicyFile needs tokenAuthFile');
  });
  it('refuses a bad token file with the apiserver message', async () => {
    await expect(startDevCluster({ tokenAuthFile: join(dir, 'bad-tokens.csv') })).rejects.toThrow(
      `token file '${join(dir, 'bad-tokens.csv')}' must have at least 3 columns (token, user name, user uid), found 2`,
    );
  });
});

describe('request log without authentication', () => {
  it('records plain and upgrade requests as they arrived, with no user', async () => {
    const seen: RecordedRequest[] = [];
    const cluster = await startDevCluster({ onRequest: (r) => seen.push(r) });
    try {
      const res = await fetch(`${cluster.url}/api/v1/namespaces/default/pods?x=1`, { headers: { 'X-Remote-User': 'mallory', Authorization: 'Bearer ignored' } });
      expect(res.status).toBe(200);
      const ws = new WebSocket(`${cluster.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true`, ['v4.channel.k8s.io']);
      await new Promise((r) => ws.once('close', r));
      expect(cluster.requests).toBe(cluster.requests); // a live array
      expect(seen).toEqual(cluster.requests);
      const [plain, upgrade] = cluster.requests;
      expect(plain).toMatchObject({ listener: 'api', method: 'GET', url: '/api/v1/namespaces/default/pods?x=1', upgrade: false });
      expect(plain!.headers['x-remote-user']).toBe('mallory');
      expect(plain!.rawHeaders).toContain('X-Remote-User');
      expect(plain!.user).toBeUndefined();
      expect(upgrade).toMatchObject({ listener: 'api', method: 'GET', upgrade: true, url: '/api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true' });
      expect(upgrade!.headers.upgrade).toBe('websocket');
      expect(cluster.kubeletUrl).toBeUndefined();
    } finally {
      await cluster.close();
    }
  });
});
