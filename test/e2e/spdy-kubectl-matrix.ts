/**
 * The SPDY acceptance matrix, shared by the direct run (kubectl → dev cluster) and the passthrough run
 * (kubectl → proxy → dev cluster). Every client here speaks SPDY/3.1: kubectl 1.27 and 1.28 know nothing else, and 1.33 is forced
 * onto SPDY with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false / KUBECTL_PORT_FORWARD_WEBSOCKETS=false.
 *
 * Assertions are on bytes, exit codes and sha256. kubectl is found by findKubectl(); a missing binary
 * fails the tests. Only SKIP_KUBECTL_E2E=1 skips them (see kubectlE2eSkipReason; CI never sets it).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, startKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { sha256, sha256File } from '../helpers/hash.js';
import { deterministicBytes, repeatedPatternDigest, writeDeterministicFile } from '../helpers/random-data.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { expectShellFollowsResize, startTmux } from '../helpers/tty.js';

/** One acceptance client: a kubectl version plus the environment toggles it runs with. */
export interface Client {
  name: string;
  version: KubectlVersion;
  env: Record<string, string>;
}

const CLIENTS: Client[] = [
  { name: 'kubectl 1.27 (SPDY only)', version: '1.27', env: {} },
  { name: 'kubectl 1.28 (SPDY only)', version: '1.28', env: {} },
  { name: 'kubectl 1.33 with WebSockets disabled (SPDY)', version: '1.33', env: { ...FORCE_SPDY_ENV } },
];

const MB = 1_000_000;
const STDIN_BYTES = 20 * MB;
const STDOUT_BYTES = 100 * MB;
const CP_BYTES = 20 * MB;
const PF_BYTES = 10 * MB;
const PF_CONCURRENT = 5;
const PF_CONCURRENT_BYTES = 2 * MB;

/** Where kubectl points: the dev cluster itself, or the proxy in front of it. */
export interface MatrixTarget {
  /** URL for the kubeconfig. */
  url: string;
  /**
   * Streaming upgrades that took the path under test so far (e.g. the proxy's passthrough 101s);
   * undefined when there is nothing to count (direct runs).
   */
  streamingUpgrades?: () => Promise<number>;
  close(): Promise<void>;
}

/** Define the matrix; `start` gets a fresh pods folder and returns the target. `clients`: SPDY clients only (default 1.27, 1.28, 1.33 forced). */
export function describeSpdyKubectlMatrix(title: string, start: (podsDir: string) => Promise<MatrixTarget>, clients: readonly Client[] = CLIENTS): void {
  const skipReason = kubectlE2eSkipReason();
  describe.skipIf(skipReason !== undefined)(title, () => {
    let work: string;
    let target: MatrixTarget;
    let kubeconfig: string;
    let fixture: BytesServer;
    let stdinData: Buffer;
    let cpSource: string;
    let cpSourceSha: string;

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'ksp-e2e-kubectl-'));
      fixture = await startBytesServer();
      stdinData = deterministicBytes(20, STDIN_BYTES);
      cpSource = join(work, 'cp-source.bin');
      cpSourceSha = (await writeDeterministicFile(cpSource, 21, CP_BYTES)).sha256;
      target = await start(join(work, 'pods'));
      kubeconfig = join(work, 'kubeconfig');
      writeKubeconfig(kubeconfig, { server: target.url, name: 'e2e' });
    });

    afterAll(async () => {
      await target?.close();
      await fixture?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    describe.each(clients)('$name', (client) => {
      let bin: string;
      const tag = client.version.replace('.', '');
      const kubectl = (args: string[], o: { stdin?: Buffer; timeoutMs?: number; hashStdout?: boolean } = {}) =>
        runKubectl(bin, args, { kubeconfig, env: client.env, cwd: work, timeoutMs: 60_000, ...o });

      /** Run `fn`, then check the streaming path under test was taken (when the target counts it). */
      const streamed = async (fn: () => Promise<void>): Promise<void> => {
        const before = await target.streamingUpgrades?.();
        await fn();
        if (before !== undefined) expect(await target.streamingUpgrades!()).toBeGreaterThan(before);
      };

      beforeAll(() => {
        // Throws (failing every test of this client) with the list of places searched.
        bin = findKubectl(client.version);
      });

      it('get pod demo', async () => {
        const r = await kubectl(['get', 'pod', 'demo', '-o', 'jsonpath={.metadata.name}']);
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toBe('demo');
      });

      it('exec echo hi → "hi\\n", exit 0', () =>
        streamed(async () => {
          const r = await kubectl(['exec', 'demo', '--', 'echo', 'hi']);
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdout.toString()).toBe('hi\n');
        }));

      it('exec propagates exit code 3', () =>
        streamed(async () => {
          const r = await kubectl(['exec', 'demo', '--', 'sh', '-c', 'exit 3']);
          expect(r.code, summary(r)).toBe(3);
          expect(r.stdout.length).toBe(0);
        }));

      it('exec keeps stdout and stderr apart', () =>
        streamed(async () => {
          const r = await kubectl(['exec', 'demo', '--', 'sh', '-c', 'echo out; echo err >&2']);
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdout.toString()).toBe('out\n');
          expect(r.stderr).toContain('err');
          expect(r.stderr).not.toContain('out');
        }));

      it('exec -i cat ends on stdin EOF', () =>
        streamed(async () => {
          const r = await kubectl(['exec', '-i', 'demo', '--', 'cat'], { stdin: Buffer.from('data\n'), timeoutMs: 30_000 });
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdout.toString()).toBe('data\n');
        }));

      it(`exec -i sha256sum of ${STDIN_BYTES / MB} MB stdin`, () =>
        streamed(async () => {
          const r = await kubectl(['exec', '-i', 'demo', '--', 'sh', '-c', 'sha256sum'], { stdin: stdinData });
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdout.toString()).toBe(`${sha256(stdinData)}  -\n`);
        }));

      it(`exec streams ${STDOUT_BYTES / MB} MB of stdout byte-exact`, () =>
        streamed(async () => {
          const r = await kubectl(['exec', 'demo', '--', 'sh', '-c', `yes abcdefghij | head -c ${STDOUT_BYTES}`], { hashStdout: true, timeoutMs: 100_000 });
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdoutDigest).toEqual(repeatedPatternDigest('abcdefghij\n', STDOUT_BYTES));
        }));

      it('exec -it under a terminal: stty size follows the window', () =>
        streamed(async () => {
          const tty = await startTmux({
            argv: [bin, '--kubeconfig', kubeconfig, 'exec', '-it', 'demo', '--', 'sh'],
            env: kubectlEnv(kubeconfig, client.env),
            width: 100,
            height: 30,
            cwd: work,
          });
          try {
            await expectShellFollowsResize(tty);
            await tty.sendLine('exit 0');
            expect(await tty.waitForExit(15_000)).toBe(0);
          } finally {
            await tty.kill();
          }
        }));

      it(`kubectl cp ${CP_BYTES / MB} MB up and down`, () =>
        streamed(async () => {
          const remote = `up-${tag}.bin`;
          const up = await kubectl(['cp', 'cp-source.bin', `demo:${remote}`]);
          expect(up.code, summary(up)).toBe(0);
          // Check the upload on its own, so a download bug can't hide an upload bug.
          const check = await kubectl(['exec', 'demo', '--', 'sha256sum', remote]);
          expect(check.code, summary(check)).toBe(0);
          expect(check.stdout.toString()).toBe(`${cpSourceSha}  ${remote}\n`);
          const down = await kubectl(['cp', `demo:${remote}`, `down-${tag}.bin`]);
          expect(down.code, summary(down)).toBe(0);
          expect(await sha256File(join(work, `down-${tag}.bin`))).toEqual({ sha256: cpSourceSha, byteLength: CP_BYTES });
        }));

      it('attach -i drives the main shell', () =>
        streamed(async () => {
          const r = await kubectl(['attach', '-i', 'demo'], { stdin: Buffer.from('echo attached-ok\nexit 0\n'), timeoutMs: 30_000 });
          expect(r.code, summary(r)).toBe(0);
          expect(r.stdout.toString()).toContain('attached-ok');
        }));

      it(`port-forward: ${PF_BYTES / MB} MB download and ${PF_CONCURRENT} concurrent connections, byte-exact`, () =>
        streamed(async () => {
          const before = fixture.requests;
          const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${fixture.port}`], { kubeconfig, env: client.env, cwd: work });
          let exit: Awaited<ReturnType<typeof pf.stop>>;
          try {
            const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${fixture.port}`), 30_000);
            const local = `http://127.0.0.1:${m[1]}`;
            const big = await downloadDigest(`${local}/bytes/${PF_BYTES}?seed=30`);
            expect(big.status).toBe(200);
            expect({ sha256: big.sha256, byteLength: big.byteLength }).toEqual(fixture.expected(PF_BYTES, 30));
            const seeds = Array.from({ length: PF_CONCURRENT }, (_, i) => 31 + i);
            const many = await Promise.all(seeds.map((s) => downloadDigest(`${local}/bytes/${PF_CONCURRENT_BYTES}?seed=${s}`)));
            many.forEach((d, i) => {
              expect(d.status).toBe(200);
              expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(fixture.expected(PF_CONCURRENT_BYTES, seeds[i]));
            });
            expect(fixture.requests - before).toBe(1 + PF_CONCURRENT);
          } finally {
            // Stop it even when an assertion failed; the exit is asserted below so it can't mask that failure.
            exit = await pf.stop('SIGINT', 10_000);
          }
          const { stdout, stderr } = pf.output();
          // kubectl port-forward handles SIGINT and returns normally: exit 0, not killed by us.
          expect(exit, `${pf.command}\nstdout: ${stdout}\nstderr: ${stderr}`).toEqual({ code: 0, signal: null, killed: false });
        }));
    });
  });
}
