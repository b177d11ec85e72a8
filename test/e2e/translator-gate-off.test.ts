/**
 * `--feature-gates TranslateStreamCloseWebsocketRequests=false`: WebSocket v5 requests are no longer
 * translated. They pass through to the upstream, which has no v5 and refuses the WebSocket
 * handshake, so kubectl falls back to SPDY (passthrough) and every command still succeeds, while the
 * translator counter never moves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { sha256File } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, kubectlEnv, runKubectl, summary, type KubectlVersion } from '../helpers/kubectl.js';
import { writeDeterministicFile } from '../helpers/random-data.js';
import { startTmux } from '../helpers/tty.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

const VERSIONS: KubectlVersion[] = ['1.30', '1.33'];
const CP_BYTES = 5_000_000;

describe.skipIf(kubectlE2eSkipReason() !== undefined)('translator gate off: kubectl falls back to SPDY', () => {
  let fx: TranslatorFixture;
  let cpSha: string;

  beforeAll(async () => {
    fx = await startTranslatorFixture({ featureGates: { TranslateStreamCloseWebsocketRequests: false } });
    cpSha = (await writeDeterministicFile(join(fx.work, 'cp-source.bin'), 41, CP_BYTES)).sha256;
  });

  afterAll(async () => {
    await fx?.close();
  });

  describe.each(VERSIONS)('kubectl %s', (version) => {
    let bin: string;
    const kubectl = (args: string[], stdin?: Buffer) =>
      runKubectl(bin, args, { kubeconfig: fx.kubeconfig, cwd: fx.work, timeoutMs: 60_000, ...(stdin ? { stdin } : {}) });

    beforeAll(() => {
      bin = findKubectl(version);
    });

    it('echo, exit code, stdin EOF, cp and attach succeed; the translator counter stays untouched', async () => {
      const before = await fx.translatedByCode();
      const echo = await kubectl(['exec', 'demo', '--', 'echo', 'hi']);
      expect(echo.code, summary(echo)).toBe(0);
      expect(echo.stdout.toString()).toBe('hi\n');
      const exit = await kubectl(['exec', 'demo', '--', 'sh', '-c', 'exit 3']);
      expect(exit.code, summary(exit)).toBe(3);
      const cat = await kubectl(['exec', '-i', 'demo', '--', 'cat'], Buffer.from('data\n'));
      expect(cat.code, summary(cat)).toBe(0);
      expect(cat.stdout.toString()).toBe('data\n');
      const tag = version.replace('.', '');
      const up = await kubectl(['cp', 'cp-source.bin', `demo:off-${tag}.bin`]);
      expect(up.code, summary(up)).toBe(0);
      const down = await kubectl(['cp', `demo:off-${tag}.bin`, `off-down-${tag}.bin`]);
      expect(down.code, summary(down)).toBe(0);
      expect((await sha256File(join(fx.work, `off-down-${tag}.bin`))).sha256).toBe(cpSha);
      const attach = await kubectl(['attach', '-i', 'demo'], Buffer.from('echo attached-ok\nexit 0\n'));
      expect(attach.code, summary(attach)).toBe(0);
      expect(attach.stdout.toString()).toContain('attached-ok');
      expect(await fx.translatedByCode()).toEqual(before);
    });

    it('exec -it works and is not translated', async () => {
      const before = await fx.translatedByCode();
      const tty = await startTmux({
        argv: [bin, '--kubeconfig', fx.kubeconfig, 'exec', '-it', 'demo', '--', 'sh'],
        env: kubectlEnv(fx.kubeconfig),
        width: 100,
        height: 30,
        cwd: fx.work,
      });
      try {
        const hasLine = (line: string) => (s: string) => s.split('\n').some((l) => l.trim() === line);
        const size = (): Promise<void> => tty.sendLine('stty size');
        await size();
        await tty.waitForScreen(hasLine('30 100'), 30_000, { onPoll: size, retryEveryMs: 1000 });
        await tty.sendLine('exit 0');
        expect(await tty.waitForExit(15_000)).toBe(0);
      } finally {
        await tty.kill();
      }
      expect(await fx.translatedByCode()).toEqual(before);
    });
  });
});
