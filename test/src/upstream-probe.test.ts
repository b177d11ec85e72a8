/** UpstreamProbe: one dial per cache period, concurrent checks share it, failures are reported. */
import { describe, expect, it } from 'vitest';
import { Socket } from 'node:net';
import { UpstreamUnreachableError } from '../../src/errors.js';
import { UpstreamProbe } from '../../src/upstream-probe.js';

function fakeUpstream(results: Array<'ok' | 'fail'>) {
  let dials = 0;
  return {
    get dials() {
      return dials;
    },
    dial: async (): Promise<Socket> => {
      const r = results[dials++] ?? 'ok';
      if (r === 'fail') throw new UpstreamUnreachableError('http://upstream.invalid', new Error('error dialing backend: ECONNREFUSED'));
      return new Socket();
    },
  };
}

describe('UpstreamProbe', () => {
  it('shares one dial between concurrent checks and caches the result', async () => {
    const up = fakeUpstream(['ok']);
    const probe = new UpstreamProbe(up, { cacheMs: 60_000 });
    const results = await Promise.all([probe.check(), probe.check(), probe.check()]);
    expect(results).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    expect(await probe.check()).toEqual({ ok: true });
    expect(up.dials).toBe(1);
  });

  it('reports a failed dial with its message and counts it', async () => {
    const up = fakeUpstream(['fail', 'ok']);
    const reasons: string[] = [];
    const probe = new UpstreamProbe(up, { cacheMs: 0, onDialError: (r) => reasons.push(r) });
    const failed = await probe.check();
    expect(failed.ok).toBe(false);
    expect(failed.message).toMatch(/ECONNREFUSED/);
    expect(reasons).toEqual(['unreachable']);
    expect(await probe.check()).toEqual({ ok: true });
    expect(up.dials).toBe(2);
  });
});
