/**
 * Finding a binary that a benchmark path borrows from Debian (nginx, HAProxy, socat, the C compiler
 * and libssl-dev's headers of the TLS floor relay), installing its
 * package with apt-get when it is missing and the bench may do so, or saying why the path is skipped
 * (with the command that would install it).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
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
  const skip = installDebianPackage(pkg, bin, install, log);
  if (skip !== undefined) return { skip };
  const path = findBinary(bin);
  return path ? { bin: path } : { skip: `apt-get installed ${pkg} but no ${bin} binary was found` };
}

/**
 * The file `path` from Debian's package `pkg` (a header of a -dev package), installing the package
 * first when `install` is set and the file is missing. Returns undefined, or why it is missing (with
 * the install command).
 */
export function ensureDebianFile(pkg: string, path: string, install: boolean, log: (line: string) => void = () => undefined): string | undefined {
  if (existsSync(path)) return undefined;
  const skip = installDebianPackage(pkg, path, install, log);
  if (skip !== undefined) return skip;
  return existsSync(path) ? undefined : `apt-get installed ${pkg} but there is no ${path}`;
}

/** apt-get install `pkg` (which provides the missing `what`); undefined when it went, else why not. */
function installDebianPackage(pkg: string, what: string, install: boolean, log: (line: string) => void): string | undefined {
  const cmd = installCommand(pkg);
  if (!install) return `${what} is not installed (${cmd})`;
  if (process.getuid?.() !== 0) return `${what} is not installed and installing it needs root (${cmd})`;
  if (spawnSync('sh', ['-c', 'command -v apt-get']).status !== 0) return `${what} is not installed and there is no apt-get to install it (${cmd})`;
  log(`note: ${what} is missing; installing Debian's "${pkg}" package (${cmd}) …`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const args = ['install', '-y', '-qq', '-o', 'DPkg::Lock::Timeout=300', pkg];
  const tryInstall = (): boolean => spawnSync('apt-get', args, { env, stdio: 'ignore', timeout: 600_000 }).status === 0;
  if (!tryInstall()) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore', timeout: 600_000 });
    if (!tryInstall()) return `${what} is not installed and "${cmd}" failed`;
  }
  return undefined;
}
