/**
 * The 'upgrade' side of the dev cluster's API: `/api/v1/namespaces/{ns}/pods/{name}/{exec|attach|portforward}`.
 * The pod and the query are validated first (a refusal is a Status written on the raw socket), then
 * the apiserver look-alike decides the way (`apiserver-streaming.ts`): refused, handed to the kubelet
 * (`kubelet-streams.ts`, in this process), or translated / tunnelled here toward the runtime.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { writeRawResponse, writeRawStatus } from '../../src/wire/http-response.js';
import { errorStatus, notFoundStatus } from '../../src/status.js';
import { streamWay, streamWire, type ApiserverStreamingPolicy, type StreamWay } from './apiserver-streaming.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import { upgradeKind, type KubeletStreams, type UpgradeKind } from './kubelet-streams.js';
import type { PodRegistry } from './pod-registry.js';
import type { RuntimeTranslation } from './runtime-translation.js';
import { parsePortForwardPorts, parseStreamOptions } from './stream-options.js';
import type { ApiserverStreamingMetrics, StreamSubresource } from './streaming-metrics.js';

/** What the upgrade handler needs. */
export interface StreamRouteDeps {
  registry: PodRegistry;
  cluster: DevClusterRuntime;
  /** The node's kubelet (pods all run on it). */
  kubelet: KubeletStreams;
  /** The node's `status.declaredFeatures`, read per request as kube-apiserver reads the Node. */
  declaredFeatures: () => readonly string[];
  /** The apiserver's version and refusals. */
  policy: ApiserverStreamingPolicy;
  /** The apiserver's own translator and tunnel (older nodes, older apiservers). */
  translation: RuntimeTranslation;
  metrics: ApiserverStreamingMetrics;
}

const STREAM_PATH = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(exec|attach|portforward)\/?$/;

/** Build the server's 'upgrade' listener. */
export function createUpgradeHandler(deps: StreamRouteDeps): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  return (req, socket, head) => {
    socket.on('error', () => undefined);
    deps.cluster.track(socket);
    try {
      route(deps, req, socket, head);
    } catch (err) {
      writeRawStatus(socket, errorStatus(500, `Internal error occurred: ${String(err)}`));
    }
  };
}

function route(deps: StreamRouteDeps, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  const url = new URL(req.url ?? '/', 'http://dev-cluster');
  const m = STREAM_PATH.exec(url.pathname);
  if (!m) return writeRawStatus(socket, errorStatus(404, 'the server could not find the requested resource'));
  const [namespace, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
  const subresource = m[3] as 'exec' | 'attach' | 'portforward';
  if (req.method !== 'GET' && req.method !== 'POST') {
    return writeRawStatus(socket, errorStatus(405, `the server does not allow this method on the requested resource (${req.method})`));
  }
  const pod = deps.registry.get(namespace, name);
  if (!pod) return writeRawStatus(socket, notFoundStatus('pods', name));

  const kind = upgradeKind(req);
  if (!kind) return writeRawStatus(socket, errorStatus(400, `unsupported upgrade protocol "${req.headers.upgrade ?? ''}"`));

  if (subresource === 'portforward') {
    // The apiserver only checks the ports it is given; the kubelet requires them where its protocol does.
    const ports = parsePortForwardPorts(url.searchParams, false);
    if (!ports.ok) return writeRawStatus(socket, ports.status);
    const way = decide(deps, req, socket, kind, subresource);
    if (way === 'tunnel') return deps.translation.tunnel(req, socket, head, { pod, ports: ports.value, cluster: deps.cluster });
    if (way === 'kubelet') deps.kubelet.portForward(req, socket, head, pod, url.searchParams, kind);
    return;
  }

  const options = parseStreamOptions(subresource, url.searchParams, pod);
  if (!options.ok) return writeRawStatus(socket, options.status);
  const way = decide(deps, req, socket, kind, subresource);
  const ctx = { subresource, pod, options: options.value, cluster: deps.cluster };
  if (way === 'translate') return deps.translation.translate(req, socket, head, ctx);
  if (way === 'kubelet') deps.kubelet.remoteCommand(req, socket, head, ctx, kind);
}

/** Decide the way (`streamWay`), count it, and answer a refusal (then 'refused'). */
function decide(deps: StreamRouteDeps, req: IncomingMessage, socket: Duplex, kind: UpgradeKind, subresource: StreamSubresource): StreamWay['way'] | 'refused' {
  const way = streamWay(deps.policy, subresource, streamWire(req, kind, subresource), deps.declaredFeatures());
  if (way.way === 'refuse') {
    const { statusCode, contentType, body } = way.refusal;
    writeRawResponse(socket, statusCode, contentType ? { 'Content-Type': contentType } : {}, body);
    return 'refused';
  }
  if (way.proxyType) deps.metrics.incWebSocketStreaming(subresource, way.proxyType);
  return way.way;
}
