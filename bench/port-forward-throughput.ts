/**
 * Port-forward measurements through a real `kubectl port-forward`: one large HTTP download (MB/s) and
 * many small keep-alive requests over one forwarded connection (requests per second). The HTTP
 * client is curl (its own process, writing to /dev/null); the HTTP server sends zeros from one
 * preallocated buffer, so neither end costs the path under test much.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startKubectl } from '../test/helpers/kubectl.js';

const ZEROS = Buffer.alloc(1 << 20);

/** A loopback HTTP server: `/zero/N` answers N zero bytes, `/small` answers 2 bytes. */
export interface ZeroServer {
  port: number;
  close(): Promise<void>;
}

/** Start the zero server on a free loopback port. */
export async function startZeroServer(): Promise<ZeroServer> {
  const server: Server = createServer((req, res) => {
    const m = /^\/zero\/(\d+)$/.exec(req.url ?? '');
    if (req.url === '/small') {
      res.writeHead(200, { 'Content-Length': 2 });
      return res.end('ok');
    }
    if (!m) {
      res.writeHead(404);
      return res.end();
    }
    let left = Number(m[1]);
    res.writeHead(200, { 'Content-Length': left, 'Content-Type': 'application/octet-stream' });
    const pump = (): void => {
      while (left > 0) {
        const n = Math.min(left, ZEROS.length);
        left -= n;
        if (!res.write(n === ZEROS.length ? ZEROS : ZEROS.subarray(0, n))) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What one port-forward measurement needs. */
export interface PortForwardSpec {
  bin: string;
  kubeconfig: string;
  env: Record<string, string>;
  /** The zero server's port (the pod's "remote" port: the dev cluster forwards to 127.0.0.1). */
  remotePort: number;
  timeoutMs: number;
}

/** Run curl; resolve with its stdout (the `-w` report) and wall time. */
function curl(args: string[], timeoutMs: number): Promise<{ out: string; wallMs: number }> {
  const started = performance.now();
  const child = spawn('curl', ['-sS', '--max-time', String(Math.ceil(timeoutMs / 1000)), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  return new Promise((resolve, reject) => {
    child.once('error', (e) => reject(new Error(`could not start curl: ${e.message}`)));
    child.once('close', (code) => {
      const wallMs = performance.now() - started;
      if (code !== 0) return reject(new Error(`curl ${args.join(' ')}: exit ${code}\n${err}`));
      resolve({ out, wallMs });
    });
  });
}

/**
 * Start `kubectl port-forward`, run `body(localPort)`, stop kubectl. The forward is set up (and
 * its first connection made) before `body` runs, so set-up time is not measured.
 */
export async function withPortForward<T>(spec: PortForwardSpec, body: (localPort: number) => Promise<T>): Promise<T> {
  const pf = startKubectl(spec.bin, ['port-forward', 'pod/demo', `:${spec.remotePort}`], { kubeconfig: spec.kubeconfig, env: spec.env });
  try {
    const m = await pf.waitForOutput(/Forwarding from 127\.0\.0\.1:(\d+)/, 30_000);
    const port = Number(m[1]);
    await curl(['-o', '/dev/null', `http://127.0.0.1:${port}/small`], spec.timeoutMs);
    return await body(port);
  } finally {
    await pf.stop('SIGINT', 10_000);
  }
}

/** Download `bytes` through the forward; rejects unless exactly `bytes` arrived. */
export async function measureDownload(port: number, bytes: number, timeoutMs: number): Promise<number> {
  const { out, wallMs } = await curl(['-o', '/dev/null', '-w', '%{size_download}', `http://127.0.0.1:${port}/zero/${bytes}`], timeoutMs);
  if (Number(out.trim()) !== bytes) throw new Error(`port-forward download: got ${out.trim()} bytes, expected ${bytes}`);
  return wallMs;
}

/** `count` small requests over one keep-alive connection; returns requests per second. */
export async function measureRequestRate(port: number, count: number, timeoutMs: number): Promise<number> {
  const url = `http://127.0.0.1:${port}/small`;
  const args = ['-w', '%{num_connects}\\n'];
  for (let i = 0; i < count; i++) args.push('-o', '/dev/null', url);
  const { out, wallMs } = await curl(args, timeoutMs);
  const connects = out.trim().split('\n').map(Number);
  if (connects.length !== count) throw new Error(`port-forward requests: ${connects.length} of ${count} answered`);
  const newConnections = connects.reduce((a, b) => a + b, 0);
  if (newConnections !== 1) throw new Error(`port-forward requests: curl opened ${newConnections} connections, expected 1 (keep-alive)`);
  return count / (wallMs / 1000);
}
