/**
 * A translated session that stays quiet for 90 s survives. kubectl ≥ 1.30 pings every 5 s and drops
 * the session after ~61 s without a pong, so this needs WebSocket pings answered (ws does it) and the
 * upstream SPDY leg kept alive (PING every 5 s). Legitimately slow (~95 s); kept alone in this file
 * so it runs in parallel with the other test files.
 */
import { PassThrough } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

/** How long the session stays idle: well past kubectl's 61 s pong deadline. */
const IDLE_MS = 90_000;

describe.skipIf(kubectlE2eSkipReason() !== undefined)('translated session idle for 90 s', () => {
  let fx: TranslatorFixture;

  beforeAll(async () => {
    fx = await startTranslatorFixture();
  });

  afterAll(async () => {
    await fx?.close();
  });

  it('kubectl 1.33 exec -i: stdin written after 90 s still arrives', { timeout: IDLE_MS + 60_000 }, async () => {
    const bin = findKubectl('1.33');
    const before = await fx.translated(200);
    const stdin = new PassThrough();
    const run = runKubectl(bin, ['exec', '-i', 'demo', '--', 'sh', '-c', 'read x; echo got:$x'], {
      kubeconfig: fx.kubeconfig,
      stdin,
      timeoutMs: IDLE_MS + 45_000,
    });
    // The idle period is what is being tested, not a stand-in for synchronisation.
    await delay(IDLE_MS);
    stdin.end('hello\n');
    const r = await run;
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe('got:hello\n');
    expect(await fx.translated(200)).toBe(before + 1);
  });
});
