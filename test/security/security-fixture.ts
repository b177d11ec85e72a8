/**
 * Shared set-up for the security tests: a test PKI (openssl), a dev cluster with static token
 * authentication, a policy file, the review APIs and (optionally) a kubelet listener over TLS that
 * requires client certificates, and the proxy in front of it in one of its security modes. Every
 * request the dev cluster receives is recorded, so tests assert on what actually went upstream.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import WebSocket from 'ws';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startDevCluster, type DevCluster, type DevClusterOptions } from '../../dev/cluster/dev-cluster.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createCa, createClientCert, createTestPki, type CertAndKey, type TestPki } from '../helpers/certs.js';

/** Users of the static token file: token, name, groups. */
export const USERS = {
  admin: { token: 'admin-token-0123456789', groups: ['system:masters'] },
  alice: { token: 'alice-token-0123456789', groups: ['devs'] },
  viewer: { token: 'viewer-token-0123456789', groups: [] as string[] },
  proxy: { token: 'proxy-token-0123456789', groups: [] as string[] },
} as const;
export type UserName = keyof typeof USERS;

/** The proxy's own identity in the dev cluster (its token file). */
export const PROXY_USER = 'kube-stream-proxy';

/**
 * The policy: admin may do anything; alice may read pods and create pods/exec|attach|portforward;
 * viewer may read pods and even `get` pods/exec (what a GET upgrade needed before kube-apiserver
 * 1.35), but not `create` it; the proxy may review tokens and access and impersonate anyone.
 */
export const POLICY = {
  rules: [
    { groups: ['system:masters'], verbs: ['*'], resources: ['*'], nonResourceURLs: ['*'] },
    { users: ['alice'], verbs: ['get', 'list', 'watch'], resources: ['pods', 'namespaces'] },
    { users: ['alice'], verbs: ['create'], resources: ['pods/exec', 'pods/attach', 'pods/portforward'] },
    { users: ['viewer'], verbs: ['get', 'list', 'watch'], resources: ['pods', 'namespaces', 'pods/exec', 'pods/attach'] },
    { users: [PROXY_USER], verbs: ['create'], resources: ['tokenreviews', 'subjectaccessreviews'] },
    { users: [PROXY_USER], verbs: ['impersonate'], resources: ['users', 'groups', 'userextras/scopes', 'uids', 'serviceaccounts'] },
    { users: [PROXY_USER], verbs: ['get', 'list'], resources: ['pods', 'nodes'] },
  ],
};

/** What to start. */
export interface SecurityFixtureOptions {
  authn: 'passthrough' | 'impersonate';
  upstreamMode?: 'apiserver' | 'kubelet';
  /** Also verify client certificates: --client-ca-file and --requestheader-client-ca-file (impersonate only). */
  clientCerts?: boolean;
  /** kubelet mode: verify kubelets with a CA that did NOT issue their certificate. */
  wrongKubeletCa?: boolean;
  /** What the proxy's token file ends with after the token (`echo token > file` writes `\n`); default nothing. */
  proxyTokenEnding?: string;
  /** `--websocket-allowed-origins`. */
  websocketAllowedOrigins?: string;
  /** More rules for the dev cluster's policy (after {@link POLICY}'s). */
  extraPolicyRules?: Record<string, unknown>[];
  /** More `serve` flags (e.g. `authenticationConfig`). */
  serveFlags?: Partial<ServeFlags>;
  /** The Kubernetes versions the dev cluster plays (default 1.36: v5 and the tunnel taken at the API and the kubelet), and its refusals of a streaming protocol. */
  clusterVersions?: Pick<DevClusterOptions, 'apiserverVersion' | 'kubeletVersion' | 'refuseWebSocketStreaming' | 'refuseSpdyStreaming'>;
}

/** A plain request to the proxy (HTTPS, trusting the test CA), optionally with a client certificate. */
export function request(
  f: Pick<SecurityFixture, 'proxy' | 'pki'>,
  path: string,
  headers: Record<string, string>,
  client?: CertAndKey,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(`${f.proxy.url}${path}`, { headers, ca: f.pki.ca.cert, ...(client ? { cert: client.cert, key: client.key } : {}) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** What {@link webSocketGetExec} may change. */
export interface WebSocketExecOptions {
  /** The pod; default `demo`. */
  pod?: string;
  /**
   * The channel protocol offered; default `v5.channel.k8s.io` (translated). `v4.base64.channel.k8s.io`
   * (what browser terminals use) and `v4.channel.k8s.io` are relayed to the upstream unchanged.
   */
  protocol?: string;
  /** The `Origin` a browser page would send. */
  origin?: string;
  /** A client certificate to present (what a browser may do by itself). */
  client?: CertAndKey;
}

/** What a {@link webSocketGetExec} saw. */
export interface WebSocketExecResult {
  /** 101, or the handshake's answer. */
  status?: number;
  /** The refusal's body (handshake refused). */
  body?: string;
  /** stdout and stderr. */
  output: string;
  /** Channel 3 (the Status). */
  statusFrame?: string;
  /** The subprotocol the server answered with (upgraded). */
  protocol?: string;
}

/** A WebSocket exec as a browser would open it: a GET upgrade. Resolves with what happened. */
export async function webSocketGetExec(
  url: string,
  token: string,
  command: string[],
  ca: Buffer,
  via: 'header' | 'subprotocol' | 'none' = 'header',
  o: WebSocketExecOptions = {},
): Promise<WebSocketExecResult> {
  const q = new URLSearchParams({ stdout: 'true', stderr: 'true' });
  for (const c of command) q.append('command', c);
  const channelProtocol = o.protocol ?? 'v5.channel.k8s.io';
  const base64 = channelProtocol.includes('base64');
  // A browser cannot set Authorization on a WebSocket: it sends the token as a subprotocol.
  const protocols = via === 'subprotocol' ? [`base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}`, channelProtocol] : [channelProtocol];
  const headers: Record<string, string> = via === 'header' ? { Authorization: `Bearer ${token}` } : {};
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/v1/namespaces/default/pods/${o.pod ?? 'demo'}/exec?${q}`, protocols, {
    headers,
    ...(o.origin !== undefined ? { origin: o.origin } : {}),
    ...(o.client ? { cert: o.client.cert, key: o.client.key } : {}),
    ca,
  });
  return new Promise((resolve) => {
    let output = '';
    let statusFrame: string | undefined;
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        resolve({ status: res.statusCode!, body, output });
        ws.terminate();
      });
    });
    ws.on('message', (data: Buffer) => {
      // base64 protocols: a text message, the channel as an ASCII digit, the payload base64-encoded.
      const channel = base64 ? data[0]! - 0x30 : data[0];
      const payload = base64 ? Buffer.from(data.subarray(1).toString(), 'base64') : data.subarray(1);
      if (channel === 1 || channel === 2) output += payload.toString();
      if (channel === 3) statusFrame = payload.toString();
    });
    ws.on('error', () => undefined);
    ws.on('close', () => resolve({ status: 101, output, protocol: ws.protocol, ...(statusFrame !== undefined ? { statusFrame } : {}) }));
  });
}

/** A dev cluster with security on, and the proxy in front. */
export interface SecurityFixture {
  work: string;
  pki: TestPki;
  /** A second CA: front-proxy certificates; `otherCa` issued nothing the cluster trusts. */
  frontProxyCa: CertAndKey;
  frontProxyClient: CertAndKey;
  cluster: DevCluster;
  proxy: RunningServer;
  /** A kubeconfig pointing at the proxy with `user`'s token (none for 'anonymous', a bad one for 'wrong'). */
  kubeconfig(user: UserName | 'anonymous' | 'wrong'): string;
  /** A kubeconfig pointing at the proxy with a client certificate issued by the client CA. */
  certKubeconfig(): string;
  /** The proxy's log lines so far (JSON, audit events included). */
  logs: string[];
  /** Audit events of sessions that did not end in success, for assertion messages. */
  failedSessions(): string;
  /** Counter value from the proxy's /metrics (0 when absent). */
  metric(name: string, labels: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

function tokenFile(): string {
  return Object.entries(USERS)
    .map(([name, u], i) => `${u.token},${name === 'proxy' ? PROXY_USER : name},uid-${i},"${u.groups.join(',')}"`)
    .join('\n');
}

/** Start the PKI, cluster and proxy in a fresh temp folder. */
export async function startSecurityFixture(o: SecurityFixtureOptions): Promise<SecurityFixture> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-security-'));
  const pki = await createTestPki(work, {
    kubeletClient: { cn: PROXY_USER },
    aliceCert: { cn: 'alice', groups: ['devs'] },
  });
  const frontProxyCa = await createCa(work, 'front-proxy CA', 'front-proxy-ca');
  const frontProxyClient = await createClientCert(work, frontProxyCa, { cn: 'front-proxy-client', name: 'front-proxy-client' });
  const otherCa = o.wrongKubeletCa ? await createCa(work, 'unrelated CA', 'other-ca') : undefined;
  writeFileSync(join(work, 'tokens.csv'), tokenFile());
  writeFileSync(join(work, 'policy.json'), JSON.stringify({ rules: [...POLICY.rules, ...(o.extraPolicyRules ?? [])] }));
  writeFileSync(join(work, 'proxy-token'), USERS.proxy.token + (o.proxyTokenEnding ?? ''));

  const cluster = await startDevCluster({
    dataDir: join(work, 'pods'),
    tls: { cert: pki.server.cert, key: pki.server.key },
    tokenAuthFile: join(work, 'tokens.csv'),
    authorizationPolicyFile: join(work, 'policy.json'),
    ...(o.upstreamMode === 'kubelet' ? { kubelet: { tls: { cert: pki.server.cert, key: pki.server.key }, clientCa: pki.ca.cert } } : {}),
    ...o.clusterVersions,
  });
  const flags: ServeFlags = {
    ...(o.websocketAllowedOrigins !== undefined ? { websocketAllowedOrigins: o.websocketAllowedOrigins } : {}),
    listen: '127.0.0.1:0',
    upstream: cluster.url,
    upstreamCaFile: pki.ca.certFile,
    upstreamTokenFile: join(work, 'proxy-token'),
    authn: o.authn,
    ...o.serveFlags,
  };
  if (o.upstreamMode === 'kubelet') {
    Object.assign(flags, {
      upstreamMode: 'kubelet',
      kubeletClientCertificate: pki.clients.kubeletClient!.certFile,
      kubeletClientKey: pki.clients.kubeletClient!.keyFile,
      kubeletCertificateAuthority: (otherCa ?? pki.ca).certFile,
      kubeletPreferredAddressTypes: 'InternalIP',
    } satisfies ServeFlags);
  }
  // HTTPS always: kubectl sends a token (or a client certificate) only over TLS (client-go applies
  // user credentials only when the transport is TLS).
  Object.assign(flags, { tlsCertFile: pki.server.certFile, tlsPrivateKeyFile: pki.server.keyFile } satisfies ServeFlags);
  if (o.clientCerts) {
    Object.assign(flags, {
      clientCaFile: pki.ca.certFile,
      requestheaderClientCaFile: frontProxyCa.certFile,
      requestheaderAllowedNames: 'front-proxy-client',
    } satisfies ServeFlags);
  }
  // The proxy's log lines (audit events included) are kept for failure messages.
  const logs: string[] = [];
  const proxy = await startServer(await resolveConfig(flags), { logger: { level: 'info', stream: { write: (line: string) => void logs.push(line) } } });
  const caPem = pki.ca.cert.toString();
  const kubeconfig = (user: UserName | 'anonymous' | 'wrong'): string => {
    const path = join(work, `kubeconfig-${user}`);
    const token = user === 'anonymous' ? undefined : user === 'wrong' ? 'not-a-valid-token' : USERS[user].token;
    writeKubeconfig(path, { server: proxy.url, name: `proxy-${user}`, ...(token ? { token } : {}), ...(caPem ? { caPem } : {}) });
    return path;
  };
  const certKubeconfig = (): string => {
    const path = join(work, 'kubeconfig-cert');
    const c = pki.clients.aliceCert!;
    writeKubeconfig(path, { server: proxy.url, name: 'proxy-cert', clientCertPem: c.cert.toString(), clientKeyPem: c.key.toString(), ...(caPem ? { caPem } : {}) });
    return path;
  };
  const metric = async (name: string, labels: Record<string, string>): Promise<number> => {
    const text = await proxy.app.inject({ method: 'GET', url: '/metrics' }).then((r) => r.body);
    const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      if (want.every((w) => line.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
    return 0;
  };
  return {
    work,
    pki,
    frontProxyCa,
    frontProxyClient,
    cluster,
    proxy,
    kubeconfig,
    certKubeconfig,
    logs,
    failedSessions: () => logs.filter((l) => l.includes('"audit":true') && !l.includes('"outcome":"success"')).join(''),
    metric,
    close: async () => {
      await proxy.close();
      await cluster.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}
