/**
 * Finding a binary that a benchmark path borrows from Debian (nginx, HAProxy, socat), installing its
 * package with apt-get when it is missing and the bench may do so, or saying why the path is skipped
 * (with the command that would install it).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The binary `name` on PATH or in the sbin folders, or undefined. */
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/bin', '/usr/local/nginx/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}

/** The command that installs Debian's `pkg` (what the bench runs, and what a skip note tells). */
export function installCommand(pkg: string): string {
  return `apt-get install -y -o DPkg::Lock::Timeout=300 ${pkg}`;
}

/**
 * The binary `bin` from Debian's package `pkg`, installing the package first when `install` is set
 * and the binary is missing. Returns `{ bin }` or `{ skip }` (why the path cannot run, with the
 * install command).
 */
export function ensureDebianBinary(pkg: string, bin: string, install: boolean, log: (line: string) => void = () => undefined): { bin: string } | { skip: string } {
  const found = findBinary(bin);
  if (found) return { bin: found };
  const cmd = installCommand(pkg);
  if (!install) return { skip: `${bin} is not installed (${cmd})` };
  if (process.getuid?.() !== 0) return { skip: `${bin} is not installed and installing it needs root (${cmd})` };
  if (spawnSync('sh', ['-c', 'command -v apt-get']).status !== 0) return { skip: `${bin} is not installed and there is no apt-get to install it (${cmd})` };
  log(`note: ${bin} is missing; installing Debian's "${pkg}" package (${cmd}) …`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const args = ['install', '-y', '-qq', '-o', 'DPkg::Lock::Timeout=300', pkg];
  const tryInstall = (): boolean => spawnSync('apt-get', args, { env, stdio: 'ignore', timeout: 600_000 }).status === 0;
  if (!tryInstall()) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore', timeout: 600_000 });
    if (!tryInstall()) return { skip: `${bin} is not installed and "${cmd}" failed` };
  }
  const path = findBinary(bin);
  return path ? { bin: path } : { skip: `apt-get installed ${pkg} but no ${bin} binary was found` };
}
