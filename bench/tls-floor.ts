/**
 * The C TLS floor relay of the `--cpu --tls` rows (bench/tls-floor-relay.c: single-threaded epoll,
 * OpenSSL server side, plain TCP upstream): found its tools (the machine's `cc`, Debian's libssl-dev
 * headers; installed with apt-get when missing and the bench may install, as nginx and HAProxy are),
 * compiled at bench time into the row's temp folder (no binary is committed), started in front of
 * the dev cluster.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ensureDebianBinary, ensureDebianFile } from './debian-package.js';
import { freePort } from './nginx.js';
import { startListeningChild } from './relays.js';
import { benchScriptPath, type ServerProcess } from './servers.js';

/** The relay's C source in the repository (bench/, beside the TypeScript; dist/ has no copy). */
export function tlsFloorSource(): string {
  return join(dirname(benchScriptPath('tls-floor')), '..', '..', 'bench', 'tls-floor-relay.c');
}

/** The header whose presence says libssl-dev is installed. */
export const LIBSSL_HEADER = '/usr/include/openssl/ssl.h';

/**
 * The C compiler, or why the row cannot run (with the apt-get command): `cc` (Debian's gcc) and
 * libssl-dev, installed when `install` is set and they are missing.
 */
export function prepareTlsFloor(install: boolean, log: (line: string) => void): { cc: string } | { skip: string } {
  if (!existsSync(tlsFloorSource())) return { skip: `no C source at ${tlsFloorSource()}` };
  const cc = ensureDebianBinary('gcc', 'cc', install, log);
  if ('skip' in cc) return cc;
  const headers = ensureDebianFile('libssl-dev', LIBSSL_HEADER, install, log);
  if (headers !== undefined) return { skip: headers };
  return { cc: cc.bin };
}

/** Compile the relay with `cc` into `dir`; returns the binary's path (throws with the compiler's output). */
export function buildTlsFloor(cc: string, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const bin = join(dir, 'tls-floor-relay');
  const res = spawnSync(cc, ['-O2', '-o', bin, tlsFloorSource(), '-lssl', '-lcrypto'], { encoding: 'utf8', timeout: 120_000 });
  if (res.status !== 0) throw new Error(`${cc} -O2 -o ${bin} ${tlsFloorSource()} -lssl -lcrypto: exit ${res.status}\n${res.stderr}${res.error ? String(res.error) : ''}`);
  return bin;
}

/** Build the relay into `dir` and start it in front of `upstream` (plain http) with that certificate. */
export async function startTlsFloor(cc: string, upstream: string, dir: string, certFile: string, keyFile: string): Promise<ServerProcess> {
  const up = new URL(upstream);
  if (up.protocol !== 'http:') throw new Error(`TLS floor relay: plain http upstream expected, got ${upstream}`);
  const bin = buildTlsFloor(cc, dir);
  const port = await freePort();
  const proc = await startListeningChild('tls-floor-relay', bin, [certFile, keyFile, String(port), up.hostname, up.port], port);
  return { ...proc, url: `https://127.0.0.1:${port}` };
}
