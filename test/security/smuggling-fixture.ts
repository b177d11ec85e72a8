/**
 * The request-smuggling rig: the proxy in one of its modes in front of {@link startPipelinedUpstream}
 * servers (keep-alive, pipelined requests served in order, every request recorded with the
 * credential it came on), and a raw client that writes exact bytes and reads everything the proxy
 * answers. Modes:
 *
 * - `passthrough`: plain listener, `--upstream` with the caller's credentials only;
 * - `impersonate`: HTTPS listener, `--authn impersonate`, the upstream reached with the proxy's client
 *   certificate (CN `kube-stream-proxy`) — cluster-admin in the review's threat model;
 * - `aggregated`: impersonate, plus `v1.things.example.com` registered to a second upstream reached
 *   with the front-proxy certificate (CN `front-proxy-client`) and `X-Remote-*`;
 * - `kubelet`: `--upstream-mode kubelet`, pod streams to a kubelet upstream reached with the kubelet
 *   client certificate (CN `kube-apiserver-kubelet-client`);
 * - `agent`: no `--upstream`; cluster `c1` behind an in-process agent (`--access-as impersonate`,
 *   its own client certificate CN `agent-c1`), addressed as `/clusters/c1/…`.
 */
import { connect as netConnect } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { TunnelAgent } from '../../src/tunnel/agent.js';
import { upstreamFromFiles } from '../../src/routing/upstream.js';
import { createCa, createClientCert, createTestPki, type CertAndKey, type TestPki } from '../helpers/certs.js';
import { startPipelinedUpstream, type PipelinedUpstream, type ReviewedUser } from './pipelined-upstream.js';

/** Where the rig's proxy sends requests. */
export type SmugglingMode = 'passthrough' | 'impersonate' | 'aggregated' | 'kubelet' | 'agent';

/** The token of the one user the upstream's TokenReview knows. */
export const ALICE_TOKEN = 'alice-token-0123456789';

/** CNs of the credentials each upstream sees. */
export const PROXY_CN = 'kube-stream-proxy';
export const FRONT_PROXY_CN = 'front-proxy-client';
export const KUBELET_CLIENT_CN = 'kube-apiserver-kubelet-client';
export const AGENT_CN = 'agent-c1';

/** A running rig. */
export interface SmugglingRig {
  mode: SmugglingMode;
  pki: TestPki;
  proxy: RunningServer;
  /** The primary upstream (the cluster behind the agent in `agent` mode). */
  upstream: PipelinedUpstream;
  /** The aggregated API's backend (`aggregated`), the kubelet (`kubelet`). */
  backend?: PipelinedUpstream;
  /** The path prefix of every caller path (`/clusters/c1` in `agent` mode, else empty). */
  prefix: string;
  /** Where the mode's pod streams and API requests land: the kubelet in `kubelet` mode, else the primary upstream. */
  streamUpstream: PipelinedUpstream;
  /** Every upstream of the rig. */
  upstreams: PipelinedUpstream[];
  /** The primary upstream's TokenReview table (token → user): add entries to authenticate new callers. */
  tokens: Record<string, ReviewedUser>;
  /** Write `bytes` to the proxy on one new connection and read until the proxy closes it. */
  send(bytes: Buffer | string, o?: SendOptions): Promise<Buffer>;
  close(): Promise<void>;
}

/** How {@link SmugglingRig.send} talks. */
export interface SendOptions {
  clientCert?: CertAndKey;
  /** Fail when the connection is still open after this long (default 10 s). */
  timeoutMs?: number;
  /** Close from the client side once what arrived satisfies this (an upgraded stream, a kept-alive answer). */
  closeWhen?: (received: Buffer) => boolean;
  /** Write the bytes in pieces cut at these offsets (each in its own event-loop turn). */
  splitAt?: readonly number[];
}

/** Poll `check` until it returns true (or the deadline fails the test). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Start the rig. */
export async function startSmugglingRig(mode: SmugglingMode): Promise<SmugglingRig> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-smuggling-'));
  const pki = await createTestPki(work, {
    proxyClient: { cn: PROXY_CN },
    kubeletClient: { cn: KUBELET_CLIENT_CN },
    agentClient: { cn: AGENT_CN },
    aliceCert: { cn: 'alice', groups: ['devs'] },
  });
  const frontProxyCa = await createCa(work, 'front-proxy CA', 'front-proxy-ca');
  const frontProxyClient = await createClientCert(work, frontProxyCa, { cn: FRONT_PROXY_CN, name: 'front-proxy-client' });
  const tokens: Record<string, ReviewedUser> = { [ALICE_TOKEN]: { username: 'alice', groups: ['devs'] } };
  const serverTls = { cert: pki.server.cert, key: pki.server.key, clientCa: pki.ca.cert };
  const upstreams: PipelinedUpstream[] = [];
  let backend: PipelinedUpstream | undefined;
  if (mode === 'aggregated') backend = await startPipelinedUpstream({ tls: { ...serverTls, clientCa: frontProxyCa.cert } });
  if (mode === 'kubelet') backend = await startPipelinedUpstream({ tls: serverTls });
  const upstream = await startPipelinedUpstream({ tls: serverTls, tokens, ...(backend && mode === 'kubelet' ? { kubeletPort: backend.port } : {}) });
  upstreams.push(upstream, ...(backend ? [backend] : []));

  const tlsListener: ServeFlags = { tlsCertFile: pki.server.certFile, tlsPrivateKeyFile: pki.server.keyFile };
  const flags: ServeFlags = { listen: '127.0.0.1:0' };
  if (mode === 'passthrough') Object.assign(flags, { upstream: upstream.url, upstreamCaFile: pki.ca.certFile } satisfies ServeFlags);
  else if (mode !== 'agent') {
    Object.assign(flags, {
      ...tlsListener,
      authn: 'impersonate',
      clientCaFile: pki.ca.certFile,
      upstream: upstream.url,
      upstreamCaFile: pki.ca.certFile,
      upstreamClientCertFile: pki.clients.proxyClient!.certFile,
      upstreamClientKeyFile: pki.clients.proxyClient!.keyFile,
    } satisfies ServeFlags);
  }
  if (mode === 'aggregated') {
    const file = join(work, 'apiservices.yaml');
    writeFileSync(
      file,
      `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.things.example.com
  annotations: {kube-stream-proxy.io/backend-url: "${backend!.url}"}
spec:
  group: things.example.com
  version: v1
  service: null
  caBundle: ${pki.ca.cert.toString('base64')}
  groupPriorityMinimum: 1000
  versionPriority: 15
`,
    );
    Object.assign(flags, { apiserviceConfig: file, proxyClientCertFile: frontProxyClient.certFile, proxyClientKeyFile: frontProxyClient.keyFile } satisfies ServeFlags);
  }
  if (mode === 'kubelet') {
    Object.assign(flags, {
      upstreamMode: 'kubelet',
      kubeletClientCertificate: pki.clients.kubeletClient!.certFile,
      kubeletClientKey: pki.clients.kubeletClient!.keyFile,
      kubeletCertificateAuthority: pki.ca.certFile,
      kubeletPreferredAddressTypes: 'InternalIP',
    } satisfies ServeFlags);
  }
  let agent: TunnelAgent | undefined;
  if (mode === 'agent') {
    writeFileSync(join(work, 'agent-tokens.csv'), 'agent-token-0123456789,c1\n');
    writeFileSync(join(work, 'agent-token'), 'agent-token-0123456789');
    Object.assign(flags, { ...tlsListener, authn: 'impersonate', clientCaFile: pki.ca.certFile, agentListen: '127.0.0.1:0', agentTokenFile: join(work, 'agent-tokens.csv') } satisfies ServeFlags);
  }
  const proxy = await startServer(await resolveConfig(flags), process.env.SMUGGLING_LOG ? { logger: { level: 'debug' } } : {});
  if (mode === 'agent') {
    agent = new TunnelAgent({
      proxyUrl: new URL(proxy.agentUrl!),
      proxyCa: pki.ca.cert,
      clusterName: 'c1',
      tokenFile: join(work, 'agent-token'),
      upstream: upstreamFromFiles({
        url: upstream.url,
        caFile: pki.ca.certFile,
        clientCertFile: pki.clients.agentClient!.certFile,
        clientKeyFile: pki.clients.agentClient!.keyFile,
        presentProxyIdentity: true,
      }),
      accessAs: 'impersonate',
      log: { info() {}, warn() {} },
    });
  }
  const prefix = mode === 'agent' ? '/clusters/c1' : '';

  const send = (bytes: Buffer | string, o: SendOptions = {}): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const url = new URL(proxy.url);
      const socket = url.protocol === 'https:'
        ? tlsConnect({ host: url.hostname, port: Number(url.port), ca: pki.ca.cert, ...(o.clientCert ? { cert: o.clientCert.cert, key: o.clientCert.key } : {}) })
        : netConnect({ host: url.hostname, port: Number(url.port) });
      const parts: Buffer[] = [];
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`the proxy did not close the connection within ${o.timeoutMs ?? 10_000} ms; it answered:\n${Buffer.concat(parts).toString('latin1')}`));
      }, o.timeoutMs ?? 10_000);
      const all = Buffer.from(bytes);
      const cuts = [...new Set((o.splitAt ?? []).map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
      const pieces = [...cuts, all.length].map((c, i, a) => all.subarray(i === 0 ? 0 : a[i - 1]!, c)).filter((p) => p.length > 0);
      const writeNext = (): void => {
        const piece = pieces.shift();
        if (piece && !socket.destroyed) socket.write(piece, () => setImmediate(writeNext));
      };
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', writeNext);
      socket.on('data', (d: Buffer) => {
        parts.push(d);
        if (o.closeWhen?.(Buffer.concat(parts))) socket.destroy();
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(Buffer.concat(parts));
      });
    });

  const rig: SmugglingRig = {
    mode,
    pki,
    proxy,
    upstream,
    ...(backend ? { backend } : {}),
    prefix,
    streamUpstream: mode === 'kubelet' ? backend! : upstream,
    upstreams,
    tokens,
    send,
    close: async () => {
      await agent?.stop();
      await proxy.close();
      for (const u of upstreams) await u.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
  // Ready: the aggregated API is Available, the agent's cluster answers.
  const auth = mode === 'passthrough' ? '' : `Authorization: Bearer ${ALICE_TOKEN}\r\n`;
  const probe = mode === 'aggregated' ? '/apis/things.example.com/v1/namespaces/default/widgets' : `${prefix}/api/v1/namespaces/default/pods`;
  let last = '';
  await until(`${mode} rig ready`, async () => {
    const answer = await send(`GET ${probe} HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: close\r\n\r\n`);
    last = answer.toString('latin1');
    return last.startsWith('HTTP/1.1 200');
  }).catch((e: Error) => {
    throw new Error(`${e.message}; last answer:\n${last}`);
  });
  for (const u of upstreams) u.requests.length = 0;
  return rig;
}
