/**
 * The byte relays the CPU benchmark (bench/cpu.ts) puts between kubectl and the dev cluster besides
 * the proxy and nginx: HAProxy (HTTP mode, `option splice-auto`), socat (read/write, one forked
 * process per connection) and the bare Node relay (bench/bare-relay.ts); for the `--cpu --tls` rows
 * HAProxy with `bind … ssl` and the bare Node TLS relay (bench/bare-tls-relay.ts). Each runs on
 * loopback in the foreground as a child process, with its config in a temp folder (never the
 * system's /etc).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canConnect, freePort } from './nginx.js';
import { SERVER_START_TIMEOUT_MS, benchScriptPath, startNodeScript, type ServerOptions, type ServerProcess } from './servers.js';

/**
 * haproxy.cfg: one thread (like nginx's one worker and the proxy's one event loop), HTTP mode, splice;
 * with `tlsPem` (certificate and key in one PEM file) the frontend binds with `ssl` (no splice then).
 */
export function haproxyConfig(o: { port: number; upstream: URL; tlsPem?: string }): string {
  return `# kube-stream-proxy bench: HAProxy as an HTTP-mode passthrough with splice (generated).
global
  nbthread 1
  maxconn 4096

defaults
  mode http
  option splice-auto
  timeout connect 60s
  timeout client 3600s
  timeout server 3600s
  timeout tunnel 3600s

frontend bench
  bind 127.0.0.1:${o.port}${o.tlsPem ? ` ssl crt ${o.tlsPem}` : ''}
  default_backend devcluster

backend devcluster
  server devcluster ${o.upstream.host}
`;
}

/** Start `bin args`, wait until `port` accepts connections, and return it as a server process. */
export async function startListeningChild(name: string, bin: string, args: string[], port: number, timeoutMs = 15_000): Promise<ServerProcess> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = `code=${code} signal=${signal}`));
  child.once('error', (err) => (exited = err.message));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited !== undefined) throw new Error(`${name} exited early (${exited}):\n${output}`);
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} did not listen on 127.0.0.1:${port} within ${timeoutMs} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}

/**
 * HAProxy (`bin`) on a free loopback port in front of `upstream`; its config goes under `dir`. With
 * `tls` it serves TLS with that certificate and key (`https://` URL).
 */
export async function startHaproxy(bin: string, upstream: string, dir: string, tls?: { cert: Buffer; key: Buffer }): Promise<ServerProcess> {
  const up = new URL(upstream);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const cfg = join(dir, 'haproxy.cfg');
  let tlsPem: string | undefined;
  if (tls) {
    tlsPem = join(dir, 'server.pem');
    writeFileSync(tlsPem, Buffer.concat([tls.cert, tls.key]), { mode: 0o600 });
  }
  writeFileSync(cfg, haproxyConfig({ port, upstream: up, ...(tlsPem ? { tlsPem } : {}) }));
  const proc = await startListeningChild('haproxy', bin, ['-db', '-f', cfg], port);
  return tls ? { ...proc, url: `https://127.0.0.1:${port}` } : proc;
}

/** socat (`bin`) on a free loopback port relaying every connection to `upstream` (a forked child each). */
export async function startSocat(bin: string, upstream: string): Promise<ServerProcess> {
  const up = new URL(upstream);
  const port = await freePort();
  return startListeningChild('socat', bin, [`TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork,nodelay`, `TCP:${up.hostname}:${up.port},nodelay`], port);
}

/** The bare Node relay (bench/bare-relay.ts, compiled) in front of `upstream`. */
export function startBareRelay(upstream: string, options: ServerOptions = {}): Promise<ServerProcess> {
  return startNodeScript(benchScriptPath('bare-relay'), [upstream], /^bare relay listening on /, SERVER_START_TIMEOUT_MS, options);
}

/** The bare Node TLS relay (bench/bare-tls-relay.ts, compiled): TLS from kubectl, plain TCP to `upstream`. */
export function startBareTlsRelay(upstream: string, certFile: string, keyFile: string, options: ServerOptions = {}): Promise<ServerProcess> {
  return startNodeScript(benchScriptPath('bare-tls-relay'), [upstream, certFile, keyFile], /^bare TLS relay listening on /, SERVER_START_TIMEOUT_MS, options);
}
