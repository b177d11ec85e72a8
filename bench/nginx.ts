/**
 * nginx as a plain passthrough reverse proxy in front of the dev cluster (the "nginx passthrough"
 * benchmark path): HTTP/1.1 upstream, `Upgrade`/`Connection: upgrade` forwarded, no buffering, long
 * timeouts (with TLS on its listener for the `--cpu --tls` rows). It runs on loopback with its own prefix, config, pid and log files in a temp folder (never
 * the system's /etc/nginx), in the foreground as a child process.
 *
 * Debian's `nginx` package provides the binary. When it is missing the bench installs it with
 * `apt-get install -y -o DPkg::Lock::Timeout=300 nginx` (as root, where apt-get exists) or skips the path with a printed note.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { ensureDebianBinary, findBinary } from './debian-package.js';
import type { ServerProcess } from './servers.js';

/** The nginx binary on PATH or in /usr/sbin, or undefined. */
export function findNginx(): string | undefined {
  return findBinary('nginx');
}

/**
 * The nginx binary, installing Debian's package first when `install` is set and it is missing.
 * Returns `{ bin }` or `{ skip }` (why the nginx path cannot run).
 */
export function ensureNginx(install: boolean, log: (line: string) => void = () => undefined): { bin: string } | { skip: string } {
  return ensureDebianBinary('nginx', 'nginx', install, log);
}

/** A free loopback TCP port (bound, then released; nginx needs the number in its config). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** TLS on nginx's listener (`listen … ssl`), for the `--cpu --tls` rows. */
export interface NginxTls {
  certFile: string;
  keyFile: string;
  /** `proxy_buffer_size` (the buffer of each direction of an upgraded connection; nginx's default is 4k). */
  proxyBufferSize?: string;
}

/**
 * The nginx.conf of the passthrough: one worker (the proxy is one event loop too), loopback only;
 * with `tls`, `listen … ssl` with that certificate (and the upgraded connection's buffer size).
 */
export function nginxConfig(o: { prefix: string; port: number; upstream: URL; runAsRoot: boolean; tls?: NginxTls }): string {
  const tls = o.tls
    ? ` ssl;\n    ssl_certificate ${o.tls.certFile};\n    ssl_certificate_key ${o.tls.keyFile};` +
      // nginx wants proxy_busy_buffers_size below proxy_buffers minus one (8 × 4k by default; unused
      // with proxy_buffering off), and its default is twice proxy_buffer_size: keep it at the size.
      (o.tls.proxyBufferSize ? `\n    proxy_buffer_size ${o.tls.proxyBufferSize};\n    proxy_busy_buffers_size ${o.tls.proxyBufferSize};` : '')
    : ';';
  const p = (name: string): string => join(o.prefix, name);
  return `# kube-stream-proxy bench: nginx as a plain passthrough reverse proxy (generated).
${o.runAsRoot ? 'user root;\n' : ''}daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 16384;
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;

events {
  worker_connections 8192;
}

http {
  access_log off;
  client_body_temp_path ${p('client_body')};
  proxy_temp_path ${p('proxy')};
  fastcgi_temp_path ${p('fastcgi')};
  uwsgi_temp_path ${p('uwsgi')};
  scgi_temp_path ${p('scgi')};

  server {
    listen 127.0.0.1:${o.port}${tls}
    client_max_body_size 0;

    location / {
      proxy_pass http://${o.upstream.host};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_connect_timeout 60s;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
}
`;
}

/**
 * Start nginx (`bin`) on a free loopback port in front of `upstream`; files go under `dir`. `render`
 * writes the nginx.conf (default: the passthrough of {@link nginxConfig}); with `tls` the passthrough
 * listens with TLS (`https://` URL) and `render` is not used.
 */
export async function startNginx(
  bin: string,
  upstream: string,
  dir: string,
  timeoutMs = 15_000,
  render: (o: { prefix: string; port: number; upstream: URL; runAsRoot: boolean }) => string = nginxConfig,
  tls?: NginxTls,
): Promise<ServerProcess> {
  const up = new URL(upstream);
  if (up.protocol !== 'http:') throw new Error(`nginx bench path: plain http upstream expected, got ${upstream}`);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, tls ? nginxConfig({ prefix: dir, port, upstream: up, runAsRoot: process.getuid?.() === 0, tls }) : render({ prefix: dir, port, upstream: up, runAsRoot: process.getuid?.() === 0 }));
  const child = spawn(bin, ['-p', dir, '-c', conf, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `code=${code} signal=${signal}`));
  child.once('error', (err) => (exited = err.message));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited !== undefined) throw new Error(`nginx exited early (${exited}):\n${output}`);
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nginx did not listen on 127.0.0.1:${port} within ${timeoutMs} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    pid: child.pid!,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.kill('SIGTERM'); // nginx: fast shutdown of master and workers
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}
