/**
 * scripts/provision-test-tools.sh (`npm test`'s pretest step), run with PATH set to a folder of stub
 * programs: it says nothing when every program is there, installs exactly the missing Debian packages
 * through apt-get when it runs as root (one `update` first, both waiting for the dpkg lock), and
 * otherwise stops with the command to run.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const SCRIPT = resolve(import.meta.dirname, '../../scripts/provision-test-tools.sh');
const PROGRAMS = ['prometheus', 'promtool', 'tmux', 'nginx', 'haproxy', 'socat', 'openssl', 'chromium', 'asciinema', 'python3'];
/** Debian package → programs, as the script knows them. */
const PACKAGE_PROGRAMS: Record<string, string[]> = { prometheus: ['prometheus', 'promtool'], tmux: ['tmux'], nginx: ['nginx'], haproxy: ['haproxy'], socat: ['socat'], openssl: ['openssl'], chromium: ['chromium'], asciinema: ['asciinema'], 'python3-kubernetes': ['python3'] };

let bin: string;

function stub(name: string, body = 'exit 0'): void {
  const file = join(bin, name);
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
}

/** Run the script with only the stub folder on PATH (the script itself adds the sbin folders). */
function run(env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  // The Python that must import `kubernetes`: a stub that succeeds while it exists.
  const r = spawnSync('/bin/sh', [SCRIPT], { env: { PATH: bin, KSP_PYTHON: join(bin, 'python3'), ...env }, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeEach(() => {
  bin = mkdtempSync(join(tmpdir(), 'ksp-provision-'));
  for (const p of PROGRAMS) stub(p);
});
afterEach(() => rmSync(bin, { recursive: true, force: true }));

describe('provision-test-tools.sh', () => {
  it('exits 0 and prints nothing when every program is present', () => {
    expect(run()).toEqual({ status: 0, stdout: '', stderr: '' });
  });

  it('names the missing packages (dry run)', () => {
    unlinkSync(join(bin, 'promtool'));
    unlinkSync(join(bin, 'tmux'));
    const r = run({ KSP_PROVISION_DRY_RUN: '1' });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('provision-test-tools: missing Debian packages: prometheus tmux\n');
  });

  it('as root with apt-get: one update, then an install of exactly the missing packages, both waiting for the lock', () => {
    unlinkSync(join(bin, 'prometheus'));
    unlinkSync(join(bin, 'promtool'));
    unlinkSync(join(bin, 'tmux'));
    stub('id', 'echo 0');
    const log = join(bin, 'apt-get.log');
    // The stub apt-get logs its argv and "installs" a package by creating its programs' stubs.
    const creates = Object.entries(PACKAGE_PROGRAMS)
      .map(([pkg, progs]) => `    ${pkg}) for p in ${progs.join(' ')}; do printf '#!/bin/sh\\nexit 0\\n' > "${bin}/$p"; /bin/chmod +x "${bin}/$p"; done ;;`)
      .join('\n');
    stub('apt-get', `echo "$*" >> '${log}'\nfor a in "$@"; do\n  case "$a" in\n${creates}\n  esac\ndone\nexit 0`);
    const r = run();
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(log, 'utf8')).toBe(
      '-o DPkg::Lock::Timeout=300 update -qq\n-o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus tmux\n',
    );
    expect(r.stdout).toContain('installed prometheus tmux');
    expect(existsSync(join(bin, 'promtool'))).toBe(true);
  });

  it('names python3-kubernetes when Debian\'s Python cannot import kubernetes (dry run)', () => {
    stub('python3', 'exit 1');
    const r = run({ KSP_PROVISION_DRY_RUN: '1' });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('provision-test-tools: missing Debian packages: python3-kubernetes\n');
  });

  it('as root when apt-get fails: exits 1 with the command to run', () => {
    unlinkSync(join(bin, 'socat'));
    stub('id', 'echo 0');
    stub('apt-get', 'exit 100');
    const r = run();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('apt-get update && apt-get install -y socat');
  });

  it('not root: installs nothing and prints the exact command', () => {
    // Programs that live in /usr/bin (the script also looks in the sbin folders, where nginx and haproxy are).
    unlinkSync(join(bin, 'tmux'));
    unlinkSync(join(bin, 'socat'));
    stub('id', 'echo 1000');
    stub('apt-get', `echo called > '${join(bin, 'apt-get.called')}'`);
    const r = run();
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`sudo sh -c 'apt-get update && apt-get install -y tmux socat'`);
    expect(existsSync(join(bin, 'apt-get.called'))).toBe(false);
  });
});
