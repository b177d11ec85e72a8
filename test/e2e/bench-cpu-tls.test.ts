/**
 * The TLS rows of the CPU-per-byte benchmark end to end (issue 33 item 5): `node dist/bench/run.js
 * --cpu --tls --quick --bytes 40000000 --no-install --paths …`, as a user runs it, one round, on one
 * relay of each kind: the proxy served with --tls-cert-file (SPDY passthrough), the proxy and an agent
 * with TLS on both tunnel legs (WebSocket passthrough), nginx `listen ssl`, HAProxy `bind ssl`, the
 * bare Node TLS relay and the C floor relay compiled at bench time. (The other TLS rows — the proxy's
 * translation, tunnel and WebSocket passthrough alone, the translating agent row, nginx with 16 KiB
 * buffers — start through the same code with other flags; `npm run bench -- --cpu --tls` runs them
 * all, ~11 relays × 3 measurements, too long for the suite.) Each must have run each of its
 * measurements and printed a plausible CPU figure: every one of them decrypts and encrypts in user space, so 40 MB costs each
 * at least one 10 ms tick (≥ 0.25 CPU-s/GB) and far less than 100 CPU-s/GB. A relay whose tool is
 * missing fails the test with the apt-get command that installs it (the test never installs);
 * transfer sizes are checked by the harness itself (a short transfer fails the run). It checks the
 * harness works, not the targets.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CPU_MEASUREMENTS, CPU_TLS_RELAYS } from '../../bench/cpu.js';

/** One TLS relay of each kind (see the file comment). */
const PATHS = ['passthrough-tls', 'agent-websocket-tls', 'nginx-tls', 'haproxy-tls', 'bare-tls', 'floor-tls'];
const RELAYS = CPU_TLS_RELAYS.filter((r) => PATHS.includes(r.key));
import { findBinary, installCommand } from '../../bench/debian-package.js';
import { LIBSSL_HEADER } from '../../bench/tls-floor.js';
import { OPENSSL } from '../../dev/dev-pki.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BYTES = 40_000_000;

/** The tools the TLS rows borrow from Debian, with what installs each one that is missing. */
function missingTools(): string[] {
  const missing: string[] = [];
  for (const [bin, pkg] of [['nginx', 'nginx'], ['haproxy', 'haproxy'], ['cc', 'gcc']] as const)
    if (findBinary(bin) === undefined) missing.push(`${bin} (${installCommand(pkg)})`);
  if (!existsSync(LIBSSL_HEADER)) missing.push(`libssl-dev's ${LIBSSL_HEADER} (${installCommand('libssl-dev')})`);
  if (!existsSync(OPENSSL)) missing.push(`${OPENSSL}, for the test PKI (${installCommand('openssl')})`);
  return missing;
}

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --cpu --tls --quick', () => {
  it('measures a TLS relay of each kind: stdout, stdin and port-forward, with a plausible CPU-s per GB', async () => {
    const missing = missingTools();
    expect(missing, `the TLS rows need these tools; install them: ${missing.join('; ')}`).toEqual([]);
    const cli = join(ROOT, 'dist', 'bench', 'run.js');
    expect(existsSync(cli), `${cli}: build first (npm run build)`).toBe(true);
    expect(RELAYS.map((r) => r.key).sort()).toEqual([...PATHS].sort());
    const { stdout } = await run(process.execPath, [cli, '--cpu', '--tls', '--quick', '--bytes', String(BYTES), '--no-install', '--paths', PATHS.join(',')], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
      timeout: 240_000,
    }).catch((e: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`bench --cpu --tls failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    });
    console.log(stdout);
    const lines = stdout.split('\n');
    for (const relay of RELAYS) {
      const absent = lines.find((l) => l.startsWith(`note: "${relay.name}" is absent: `));
      expect(absent, `${relay.key} did not run; install what it names`).toBeUndefined();
      for (const m of CPU_MEASUREMENTS.filter((x) => relay.env[x])) {
        const label = `${relay.key} ${m}`;
        const prefix = `round 1/1 ${relay.name} ${m}: `;
        const line = lines.find((l) => l.startsWith(prefix));
        expect(line, `${label}: no measurement line "${prefix}…"`).toBeDefined();
        const figures = /^([\d.]+) MB\/s, relay ([\d.]+) CPU-s\/GB(?:, agent ([\d.]+) CPU-s\/GB)?$/.exec(line!.slice(prefix.length));
        expect(figures, `${label}: ${line}`).not.toBeNull();
        const [mbps, cpu, agent] = [Number(figures![1]), Number(figures![2]), figures![3]];
        expect(mbps > 0 && Number.isFinite(mbps), `${label}: ${mbps} MB/s`).toBe(true);
        expect(cpu > 0 && cpu < 100, `${label}: relay ${cpu} CPU-s/GB`).toBe(true);
        // Through an agent the agent copies (and here decrypts the TLS tunnel) too.
        if (relay.key.startsWith('agent')) expect(Number(agent) > 0 && Number(agent) < 100, `${label}: agent ${agent} CPU-s/GB`).toBe(true);
        else expect(agent, label).toBeUndefined();
      }
    }
    // The printed table has every TLS row, each measured once.
    for (const relay of RELAYS) expect(stdout, relay.key).toContain(relay.name);
  }, 300_000);
});
