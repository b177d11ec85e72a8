/**
 * The embedded development cluster: one `node:http` server that answers what kubectl needs of a
 * kube-apiserver (legacy discovery, namespaces, pods with watch) and serves pods/exec, pods/attach
 * and pods/portforward as a pre-1.30 kubelet does (SPDY/3.1 and the legacy WebSocket protocols,
 * no v5). Pods run REAL local processes, each in its own working directory.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer } from 'ws';
import { DevClusterRuntime } from './cluster-runtime.js';
import { createCoreApiHandler } from './core-api.js';
import { PodRegistry } from './pod-registry.js';
import { createUpgradeHandler } from './stream-routes.js';
import { chosenProtocols } from './ws-subprotocol.js';

/** Options of {@link startDevCluster}. */
export interface DevClusterOptions {
  /** Listen host (default 127.0.0.1). */
  host?: string;
  /** Listen port (default 0: a free port). */
  port?: number;
  /** Extra pods in namespace "default"; "demo" always exists. */
  pods?: string[];
  /** Folder for the pods' working directories (default: a new temp folder, removed on close). */
  dataDir?: string;
}

/** A running dev cluster. */
export interface DevCluster {
  /** Base URL, e.g. http://127.0.0.1:6444 */
  url: string;
  port: number;
  /** The folder holding the pods' working directories. */
  dataDir: string;
  /** The pod store (for tests: create, delete, inspect processes). */
  pods: PodRegistry;
  /** Close-tracking shared with the streaming handlers. */
  runtime: DevClusterRuntime;
  /** Kill all processes, close all sockets and the server; resolves when everything is gone. */
  close(): Promise<void>;
}

/** The pod that always exists (namespace default, container "demo", `/bin/sh` on stdin). */
export const DEMO_POD = 'demo';

/** Start a dev cluster; resolves once it listens. */
export async function startDevCluster(options: DevClusterOptions = {}): Promise<DevCluster> {
  const host = options.host ?? '127.0.0.1';
  const ownDataDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'kube-stream-proxy-dev-'));
  mkdirSync(dataDir, { recursive: true });

  const runtime = new DevClusterRuntime();
  const registry = new PodRegistry(dataDir);
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    maxPayload: 32 * 1024 * 1024, // x/net/websocket's DefaultMaxPayloadBytes
    handleProtocols: (_offered: Set<string>, req: IncomingMessage) => chosenProtocols.get(req) || false,
  });
  let address = `${host}:0`;
  const server: Server = createServer(createCoreApiHandler({ registry, serverAddress: () => address }));
  server.on('upgrade', createUpgradeHandler({ registry, cluster: runtime, wss }));
  server.on('connection', (socket: Socket) => runtime.track(socket));
  server.on('clientError', (_err, socket) => socket.destroy());

  for (const name of new Set([DEMO_POD, ...(options.pods ?? [])])) registry.create({ name, namespace: 'default' });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await registry.stopAll();
    if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const port = (server.address() as { port: number }).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  address = `${urlHost}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await Promise.all([registry.stopAll(), runtime.shutdown()]);
      await serverClosed;
      if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
    })();
    return closing;
  };

  return { url: `http://${urlHost}:${port}`, port, dataDir, pods: registry, runtime, close };
}
