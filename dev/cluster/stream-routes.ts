/**
 * The 'upgrade' side of the dev cluster: `/api/v1/namespaces/{ns}/pods/{name}/{exec|attach|portforward}`.
 * The pod and the query are validated first (a refusal is a Status written on the raw socket), then
 * the request goes to the SPDY/3.1 or the WebSocket handler by its `Upgrade` header.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import { writeRawStatus } from '../../src/wire/http-response.js';
import { errorStatus, notFoundStatus } from '../../src/status.js';
import type { DevClusterRuntime } from './cluster-runtime.js';
import type { PodRegistry } from './pod-registry.js';
import { serveSpdyPortForward } from './spdy-port-forward.js';
import { serveSpdyRemoteCommand } from './spdy-remote-command.js';
import { parsePortForwardPorts, parseStreamOptions } from './stream-options.js';
import { serveWebSocketPortForward } from './websocket-port-forward.js';
import { serveWebSocketRemoteCommand } from './websocket-remote-command.js';

/** What the upgrade handler needs. */
export interface StreamRouteDeps {
  registry: PodRegistry;
  cluster: DevClusterRuntime;
  wss: WebSocketServer;
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

  const upgrade = (req.headers.upgrade ?? '').split(',')[0]!.trim().toLowerCase();
  const spdy = upgrade === 'spdy/3.1';
  if (!spdy && upgrade !== 'websocket') {
    return writeRawStatus(socket, errorStatus(400, `unsupported upgrade protocol "${req.headers.upgrade ?? ''}"`));
  }

  if (subresource === 'portforward') {
    const ports = parsePortForwardPorts(url.searchParams, !spdy);
    if (!ports.ok) return writeRawStatus(socket, ports.status);
    const ctx = { pod, ports: ports.value, cluster: deps.cluster };
    if (spdy) serveSpdyPortForward(req, socket, head, ctx);
    else serveWebSocketPortForward(deps.wss, req, socket, head, ctx);
    return;
  }

  const options = parseStreamOptions(subresource, url.searchParams, pod);
  if (!options.ok) return writeRawStatus(socket, options.status);
  const ctx = { subresource, pod, options: options.value, cluster: deps.cluster };
  if (spdy) serveSpdyRemoteCommand(req, socket, head, ctx);
  else serveWebSocketRemoteCommand(deps.wss, req, socket, head, ctx);
}
