/**
 * A translated session that stays quiet for longer than kubectl's pong deadline survives. kubectl
 * ≥ 1.30 pings every 5 s and drops the session after ~61 s without a pong (client-go: 12 ping periods
 * + 1 s), so this needs WebSocket pings answered (ws does it) and the upstream SPDY leg kept alive
 * (PING every 5 s). The idle period, 65 s, is counted from the moment the session is open (the exec'd
 * shell marks it with a file in the pod's folder), so it passes that deadline by 4 s however long
 * kubectl takes to start. Legitimately slow (~70 s); kept alone in this file so it runs in parallel
 * with the other test files.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

/**
 * How long the session stays idle once open: past kubectl's 61 s pong deadline (which runs from the
 * connection's start) with a 4 s margin, and no longer; the idle period is what is being tested.
 */
const IDLE_MS = 65_000;
/** The file the exec'd shell creates first, in the pod's working directory (the fixture's pods/default/demo). */
const OPEN_MARKER = 'translator-idle-session-open';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('translated session idle for 65 s', () => {
  let fx: TranslatorFixture;

  beforeAll(async () => {
    fx = await startTranslatorFixture();
  });

  afterAll(async () => {
    await fx?.close();
  });

  it('kubectl 1.33 exec -i: stdin written after 65 s idle still arrives', { timeout: IDLE_MS + 60_000 }, async () => {
    const bin = findKubectl('1.33');
    const before = await fx.translated(200);
    const marker = join(fx.work, 'pods', 'default', 'demo', OPEN_MARKER);
    const stdin = new PassThrough();
    const run = runKubectl(bin, ['exec', '-i', 'demo', '--', 'sh', '-c', `: > ${OPEN_MARKER}; read x; echo got:$x`], {
      kubeconfig: fx.kubeconfig,
      stdin,
      timeoutMs: IDLE_MS + 45_000,
    });
    // The session is open once the shell runs (an event, polled for; kubectl's exit ends the wait).
    let exited = false;
    void run.then(
      () => (exited = true),
      () => (exited = true),
    );
    while (!existsSync(marker) && !exited) await delay(20);
    if (!existsSync(marker)) expect.fail(`the exec never started: ${summary(await run)}`);
    // The idle period is what is being tested, not a stand-in for synchronisation.
    await delay(IDLE_MS);
    stdin.end('hello\n');
    const r = await run;
    expect(r.code, summary(r)).toBe(0);
    expect(r.stdout.toString()).toBe('got:hello\n');
    expect(await fx.translated(200)).toBe(before + 1);
  });
});
