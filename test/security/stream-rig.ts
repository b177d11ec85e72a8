/**
 * The rig of the streaming-request tests of issue 31 (findings 4 and 5): the proxy in one of its modes
 * in front of {@link startPipelinedUpstream} servers (every request they read is recorded as it
 * arrived on the wire), the proxy's JSON log lines (the audit line of each session), optionally a
 * session recording policy with a directory sink, and a raw client that writes exact bytes. Modes:
 *
 * - `passthrough`: plain listener, `--upstream`, the caller's credentials only;
 * - `impersonate`: HTTPS listener, `--authn impersonate`, the upstream reached with the proxy's client
 *   certificate; TokenReview and SubjectAccessReview answered by the upstream ({@link RigOptions.allow});
 * - `kubelet`: impersonate plus `--upstream-mode kubelet`, pod streams to a kubelet upstream;
 * - `agent`: no `--upstream`; cluster `c1` behind an in-process agent, addressed as `/clusters/c1/…`.
 */
import { connect as netConnect } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { resolveConfig, type ServeFlags } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { TunnelAgent } from '../../src/tunnel/agent.js';
import { upstreamFromFiles } from '../../src/routing/upstream.js';
import { createTestPki } from '../helpers/certs.js';
import { waitFor } from '../helpers/wait.js';
import { goParseQuery } from '../../src/wire/go-query.js';
import { startPipelinedUpstream, type Answer, type PipelinedUpstream, type SeenRequest } from './pipelined-upstream.js';

/** The rig's modes. */
export type RigMode = 'passthrough' | 'impersonate' | 'kubelet' | 'agent';

/** Bearer tokens the upstream's TokenReview knows (impersonate, kubelet, agent). */
export const TOKENS = { alice: 'alice-token-0123456789', viewer: 'viewer-token-0123456789' } as const;

/** A SubjectAccessReview's `spec.resourceAttributes`. */
export interface ReviewedAttributes {
  verb?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** What to start. */
export interface RigOptions {
  /** A SessionRecordingConfiguration (YAML); recordings go to a directory sink. */
  recordingPolicy?: string;
  /** SubjectAccessReview: whether `user` may; everything by default. */
  allow?: (user: string, a: ReviewedAttributes) => boolean;
  /** Answers before the upstream's defaults (return undefined for the default). */
  answer?: (r: SeenRequest) => Answer | undefined;
  /** More `serve` flags (`featureGates`, `upstreamStreaming`, …), applied last. */
  serveFlags?: Partial<ServeFlags>;
}

/** A running rig. */
export interface StreamRig {
  mode: RigMode;
  proxy: RunningServer;
  /** The primary upstream (the cluster behind the agent in `agent` mode). */
  upstream: PipelinedUpstream;
  /** Where pod streams land: the kubelet upstream in `kubelet` mode, else {@link upstream}. */
  streamUpstream: PipelinedUpstream;
  /** `/clusters/c1` in `agent` mode, else empty. */
  prefix: string;
  /** The `Authorization` line the mode's caller sends (`alice`), with its CRLF; empty in passthrough. */
  auth: string;
  /** The recordings directory (with a recording policy). */
  recordingDir?: string;
  /** The proxy's JSON log lines so far. */
  lines: Array<Record<string, any>>;
  /** The audit line of the session of pod `pod`, once written. */
  auditOf(pod: string, timeoutMs?: number): Promise<Record<string, any>>;
  /** The SubjectAccessReviews the upstream answered, in order. */
  reviews(): Array<{ user: string; attributes: ReviewedAttributes }>;
  /** Write `bytes` on one new connection; resolves with everything the proxy answered once it (or `closeWhen`) closed. */
  send(bytes: Buffer | string, closeWhen?: (received: Buffer) => boolean): Promise<Buffer>;
  close(): Promise<void>;
}

function sarOf(r: SeenRequest): { user: string; attributes: ReviewedAttributes } | undefined {
  if (r.method !== 'POST' || r.path !== '/apis/authorization.k8s.io/v1/subjectaccessreviews') return undefined;
  const spec = (JSON.parse(r.body.toString() || '{}') as { spec?: { user?: string; resourceAttributes?: ReviewedAttributes } }).spec ?? {};
  return { user: spec.user ?? '', attributes: spec.resourceAttributes ?? {} };
}

/** Start the rig. */
export async function startStreamRig(mode: RigMode, o: RigOptions = {}): Promise<StreamRig> {
  const work = mkdtempSync(join(tmpdir(), 'ksp-stream-rig-'));
  const pki = await createTestPki(work, { proxyClient: { cn: 'kube-stream-proxy' }, kubeletClient: { cn: 'kube-apiserver-kubelet-client' }, agentClient: { cn: 'agent-c1' } });
  const tokens = { [TOKENS.alice]: { username: 'alice', groups: ['devs'] }, [TOKENS.viewer]: { username: 'viewer', groups: [] } };
  const serverTls = { cert: pki.server.cert, key: pki.server.key, clientCa: pki.ca.cert };
  const answer = (r: SeenRequest): Answer | undefined => {
    const sar = sarOf(r);
    if (sar) {
      const allowed = o.allow?.(sar.user, sar.attributes) ?? true;
      return { status: 201, body: { kind: 'SubjectAccessReview', apiVersion: 'authorization.k8s.io/v1', status: { allowed, ...(allowed ? {} : { reason: 'denied by the test upstream' }) } } };
    }
    return o.answer?.(r);
  };
  const kubelet = mode === 'kubelet' ? await startPipelinedUpstream({ tls: serverTls, answer }) : undefined;
  const upstream = await startPipelinedUpstream({ tls: serverTls, tokens, answer, ...(kubelet ? { kubeletPort: kubelet.port } : {}) });
  const flags: ServeFlags = { listen: '127.0.0.1:0' };
  const tlsListener: ServeFlags = { tlsCertFile: pki.server.certFile, tlsPrivateKeyFile: pki.server.keyFile };
  if (mode === 'passthrough') Object.assign(flags, { upstream: upstream.url, upstreamCaFile: pki.ca.certFile } satisfies ServeFlags);
  if (mode === 'impersonate' || mode === 'kubelet') {
    Object.assign(flags, {
      ...tlsListener,
      authn: 'impersonate',
      upstream: upstream.url,
      upstreamCaFile: pki.ca.certFile,
      upstreamClientCertFile: pki.clients.proxyClient!.certFile,
      upstreamClientKeyFile: pki.clients.proxyClient!.keyFile,
    } satisfies ServeFlags);
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
  if (mode === 'agent') {
    writeFileSync(join(work, 'agent-tokens.csv'), 'agent-token-0123456789,c1\n');
    writeFileSync(join(work, 'agent-token'), 'agent-token-0123456789');
    Object.assign(flags, { ...tlsListener, authn: 'impersonate', agentListen: '127.0.0.1:0', agentTokenFile: join(work, 'agent-tokens.csv') } satisfies ServeFlags);
  }
  let recordingDir: string | undefined;
  if (o.recordingPolicy !== undefined) {
    recordingDir = join(work, 'recordings');
    writeFileSync(join(work, 'recording.yaml'), o.recordingPolicy);
    Object.assign(flags, { sessionRecordingConfig: join(work, 'recording.yaml'), sessionRecordingDir: recordingDir } satisfies ServeFlags);
  }
  Object.assign(flags, o.serveFlags);
  const lines: Array<Record<string, any>> = [];
  let partial = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      partial += chunk.toString();
      for (let at = partial.indexOf('\n'); at >= 0; at = partial.indexOf('\n')) {
        const line = partial.slice(0, at);
        partial = partial.slice(at + 1);
        try {
          lines.push(JSON.parse(line));
        } catch {
          // not JSON
        }
      }
      cb();
    },
  });
  const proxy = await startServer(await resolveConfig(flags), { logger: { level: 'info', stream } });
  let agent: TunnelAgent | undefined;
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
  const send = (bytes: Buffer | string, closeWhen?: (received: Buffer) => boolean): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      const url = new URL(proxy.url);
      const socket = url.protocol === 'https:' ? tlsConnect({ host: url.hostname, port: Number(url.port), ca: pki.ca.cert }) : netConnect({ host: url.hostname, port: Number(url.port) });
      const parts: Buffer[] = [];
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`the proxy did not close the connection within 10 s; it answered:\n${Buffer.concat(parts).toString('latin1')}`));
      }, 10_000);
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => socket.write(bytes));
      socket.on('data', (d: Buffer) => {
        parts.push(d);
        if (closeWhen?.(Buffer.concat(parts))) socket.destroy();
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(timer);
        resolve(Buffer.concat(parts));
      });
    });
  const prefix = mode === 'agent' ? '/clusters/c1' : '';
  const auth = mode === 'passthrough' ? '' : `Authorization: Bearer ${TOKENS.alice}\r\n`;
  // Ready: a plain request is answered by the (agent's) upstream.
  await waitFor(`${mode} rig ready`, async () => {
    const answer = await send(`GET ${prefix}/api/v1/namespaces/default/pods HTTP/1.1\r\nHost: proxy\r\n${auth}Connection: close\r\n\r\n`).catch(() => Buffer.alloc(0));
    return answer.toString('latin1').startsWith('HTTP/1.1 200') ? true : undefined;
  }, 20_000, 50);
  for (const u of [upstream, kubelet]) if (u) u.requests.length = 0;
  const audits = (): Array<Record<string, any>> => lines.filter((l) => l.audit === true);
  return {
    mode,
    proxy,
    upstream,
    streamUpstream: kubelet ?? upstream,
    prefix,
    auth,
    ...(recordingDir ? { recordingDir } : {}),
    lines,
    auditOf: (pod, timeoutMs = 10_000) => waitFor(`the audit line of pod ${pod}`, async () => audits().find((a) => a.pod === pod), timeoutMs, 20),
    reviews: () => upstream.requests.map(sarOf).filter((s): s is NonNullable<typeof s> => s !== undefined),
    send,
    close: async () => {
      await agent?.stop();
      await proxy.close();
      for (const u of [upstream, kubelet]) await u?.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** The status code of the first HTTP answer in `answer` (0 when there is none). */
export function statusOf(answer: Buffer): number {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(answer.toString('latin1'));
  return m ? Number(m[1]) : 0;
}

/** The JSON body of the first answer (a Status), or undefined. */
export function bodyOf(answer: Buffer): any {
  const text = answer.toString('utf8');
  const at = text.indexOf('\r\n\r\n');
  if (at < 0) return undefined;
  try {
    return JSON.parse(text.slice(at + 4));
  } catch {
    return undefined;
  }
}

/** Go's view of a request-target's query: key → values. */
export function goValuesOf(target: string): Record<string, string[]> {
  const at = target.indexOf('?');
  const out: Record<string, string[]> = {};
  if (at < 0) return out;
  for (const [k, v] of goParseQuery(Buffer.from(target.slice(at + 1), 'latin1')).pairs) (out[k.toString('utf8')] ??= []).push(v.toString('utf8'));
  return out;
}

