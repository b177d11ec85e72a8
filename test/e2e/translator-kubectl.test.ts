/**
 * Acceptance matrix for the StreamTranslatorProxy: real kubectl over WebSocket `v5.channel.k8s.io`
 * → the proxy → SPDY/3.1 → the in-process dev cluster. The dev cluster plays kube-apiserver 1.36 and
 * would take v5 itself, so the fixture's proxy runs with `--upstream-streaming spdy`: every WebSocket
 * session is translated here. kubectl 1.30–1.33 use WebSockets by default; 1.29 with
 * KUBECTL_REMOTE_COMMAND_WEBSOCKETS=true.
 *
 * Every test proves the WebSocket path was used: `apiserver_stream_translator_requests_total{code="200"}`
 * must rise by exactly the number of sessions kubectl opened (a SPDY fallback would not count).
 * `kubectl cp` to a pod opens two exec sessions (the `test -d` probe and `tar xmf -`); `kubectl cp`
 * from a pod opens one (`tar cf -`), measured with every version in the matrix.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { sha256, sha256File } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { deterministicBytes, repeatedPatternDigest, writeDeterministicFile } from '../helpers/random-data.js';
import { expectShellFollowsResize, startTmux } from '../helpers/tty.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

interface Client {
  name: string;
  version: KubectlVersion;
  env: Record<string, string>;
}

const CLIENTS: Client[] = [
  { name: 'kubectl 1.29 (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=true)', version: '1.29', env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' } },
  { name: 'kubectl 1.30', version: '1.30', env: {} },
  { name: 'kubectl 1.31', version: '1.31', env: {} },
  { name: 'kubectl 1.32', version: '1.32', env: {} },
  { name: 'kubectl 1.33', version: '1.33', env: {} },
];

const MB = 1_000_000;
const STDIN_BYTES = 20 * MB;
const STDOUT_BYTES = 100 * MB;
const CP_BYTES = 50 * MB;
/** Exec sessions `kubectl cp <local> pod:<path>` opens: the `test -d` probe, then `tar xmf -`. */
const CP_UP_SESSIONS = 2;
/** Exec sessions `kubectl cp pod:<path> <local>` opens: `tar cf -`. */
const CP_DOWN_SESSIONS = 1;

const skipReason = kubectlE2eSkipReason();

describe.skipIf(skipReason !== undefined)('kubectl → proxy (WebSocket v5 translated to SPDY) → dev cluster', () => {
  let fx: TranslatorFixture;
  let stdinData: Buffer;
  let cpSha: string;

  beforeAll(async () => {
    fx = await startTranslatorFixture();
    stdinData = deterministicBytes(30, STDIN_BYTES);
    cpSha = (await writeDeterministicFile(join(fx.work, 'cp-source.bin'), 31, CP_BYTES)).sha256;
  });

  afterAll(async () => {
    await fx?.close();
  });

  /**
   * Run `body` and assert the translator counted exactly `sessions` successful sessions meanwhile.
   * `mayLeaveEarly` sessions may instead count 500: `kubectl cp pod:… local` stops reading once the
   * tar archive ended and may exit before the Status arrives (the proxy then sees the client gone,
   * which kube-apiserver's translator counts as 500 too); they still prove the WebSocket path.
   */
  async function translated<T>(sessions: number, body: () => Promise<T>, mayLeaveEarly = 0): Promise<T> {
    const before = await fx.translatedByCode();
    const result = await body();
    const after = await fx.translatedByCode();
    const delta = (code: string): number => (after[code] ?? 0) - (before[code] ?? 0);
    const early = Math.min(delta('500'), mayLeaveEarly);
    expect(
      { sessions: delta('200') + early, other: Object.keys(after).filter((c) => c !== '200' && after[c] !== before[c] && !(c === '500' && delta('500') === early)) },
      `translator counter before ${JSON.stringify(before)} after ${JSON.stringify(after)}`,
    ).toEqual({ sessions, other: [] });
    return result;
  }

  describe.each(CLIENTS)('$name', (client) => {
    let bin: string;
    const tag = client.version.replace('.', '');
    const kubectl = (args: string[], o: { stdin?: Buffer; timeoutMs?: number; hashStdout?: boolean } = {}) =>
      runKubectl(bin, args, { kubeconfig: fx.kubeconfig, env: client.env, cwd: fx.work, timeoutMs: 60_000, ...o });

    beforeAll(() => {
      bin = findKubectl(client.version);
    });

    it('exec echo hi', async () => {
      const r = await translated(1, () => kubectl(['exec', 'demo', '--', 'echo', 'hi']));
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('hi\n');
    });

    it('exit code 3 propagates', async () => {
      const r = await translated(1, () => kubectl(['exec', 'demo', '--', 'sh', '-c', 'echo before-exit; exit 3']));
      expect(r.code, summary(r)).toBe(3);
      expect(r.stdout.toString()).toBe('before-exit\n');
    });

    it('stdout and stderr stay apart', async () => {
      const r = await translated(1, () => kubectl(['exec', 'demo', '--', 'sh', '-c', 'echo out; echo err >&2']));
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('out\n');
      expect(r.stderr).toContain('err');
      expect(r.stderr).not.toContain('out');
    });

    it('echo data | exec -i cat ends on stdin EOF', async () => {
      const r = await translated(1, () => kubectl(['exec', '-i', 'demo', '--', 'cat'], { stdin: Buffer.from('data\n'), timeoutMs: 30_000 }));
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe('data\n');
    });

    it(`${STDIN_BYTES / MB} MB stdin arrives intact (sha256)`, async () => {
      const r = await translated(1, () => kubectl(['exec', '-i', 'demo', '--', 'sha256sum'], { stdin: stdinData }));
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toBe(`${sha256(stdinData)}  -\n`);
    });

    it(`${STDOUT_BYTES / MB} MB stdout byte-exact`, async () => {
      const r = await translated(1, () =>
        kubectl(['exec', 'demo', '--', 'sh', '-c', `yes abcdefghij | head -c ${STDOUT_BYTES}`], { hashStdout: true, timeoutMs: 100_000 }),
      );
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdoutDigest).toEqual(repeatedPatternDigest('abcdefghij\n', STDOUT_BYTES));
    });

    it('exec -it under tmux: a resize reaches the pty', async () => {
      await translated(1, async () => {
        const tty = await startTmux({
          argv: [bin, '--kubeconfig', fx.kubeconfig, 'exec', '-it', 'demo', '--', 'sh'],
          env: kubectlEnv(fx.kubeconfig, client.env),
          width: 100,
          height: 30,
          cwd: fx.work,
        });
        try {
          await expectShellFollowsResize(tty);
          await tty.sendLine('exit 0');
          expect(await tty.waitForExit(15_000)).toBe(0);
        } finally {
          await tty.kill();
        }
      });
    });

    it(`kubectl cp ${CP_BYTES / MB} MB both ways, sha256 equal`, async () => {
      const remote = `up-${tag}.bin`;
      const up = await translated(CP_UP_SESSIONS, () => kubectl(['cp', 'cp-source.bin', `demo:${remote}`]));
      expect(up.code, summary(up)).toBe(0);
      const down = await translated(CP_DOWN_SESSIONS, () => kubectl(['cp', `demo:${remote}`, `down-${tag}.bin`]), CP_DOWN_SESSIONS);
      expect(down.code, summary(down)).toBe(0);
      expect(await sha256File(join(fx.work, `down-${tag}.bin`))).toEqual({ sha256: cpSha, byteLength: CP_BYTES });
    });

    it('attach -i drives the main shell', async () => {
      const r = await translated(1, () =>
        kubectl(['attach', '-i', 'demo'], { stdin: Buffer.from('echo attached-ok\nexit 0\n'), timeoutMs: 30_000 }),
      );
      expect(r.code, summary(r)).toBe(0);
      expect(r.stdout.toString()).toContain('attached-ok');
    });
  });
});
