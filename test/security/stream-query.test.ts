/**
 * Issue 31, finding 5: the recording policy, the audit line and the upstream must read one set of
 * query values. The proxy reads a streaming query with WHATWG `URLSearchParams`; kube-apiserver with
 * Go's `url.ParseQuery`, which drops a pair holding `;` or a bad escape, reads `#` as a byte, and reads
 * nothing past 10 000 pieces. Asserted on the request-target the upstream's parser received.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.js';
import { bodyOf, goValuesOf, startStreamRig, statusOf, type StreamRig } from './stream-rig.js';

const SPDY = 'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n';
const upgraded = (b: Buffer): boolean => b.includes('\r\n\r\n');

/** A policy: the sidecar is exempt, everything else in `default` is recorded. */
const POLICY = (sidecar: string): string => `apiVersion: kube-stream-proxy.io/v1alpha1
kind: SessionRecordingConfiguration
rules:
- name: sidecar
  match: {containers: ["${sidecar}"]}
  record: none
- name: everything
  match: {namespaces: [default]}
  record: output
`;

describe('finding 5: a streaming query is read as the upstream reads it, or refused', () => {
  for (const { sidecar, query, why } of [
    { sidecar: 'istio-proxy*', query: 'command=id&stdout=1&container=istio-proxy%zz&container=app', why: 'a bad escape (Go drops the pair)' },
    { sidecar: 'istio-proxy', query: 'command=id&stdout=1&container=istio-proxy#;&container=app', why: '`#` and `;` (WHATWG cuts at #, Go drops the pair)' },
    { sidecar: 'istio-proxy', query: `command=id&stdout=1&container=istio-proxy${'&'.repeat(10_000)}`, why: 'more than 10 000 pieces (Go reads none)' },
  ]) {
    describe(`${why}`, () => {
      let rig: StreamRig;
      beforeAll(async () => {
        rig = await startStreamRig('passthrough', { recordingPolicy: POLICY(sidecar) });
      });
      afterAll(async () => {
        await rig?.close();
      });

      it('is refused with 400 before anything goes upstream (or the upstream reads what the policy and the audit read)', async () => {
        const answer = await rig.send(`POST /api/v1/namespaces/default/pods/p1/exec?${query} HTTP/1.1\r\nHost: proxy\r\n${SPDY}\r\n`, upgraded);
        const seen = rig.upstream.requests.find((r) => r.path.endsWith('/pods/p1/exec'));
        if (seen) {
          // Went upstream: the exemption and the audit must have read the container the upstream runs.
          const audit = await rig.auditOf('p1');
          expect({ container: audit.container, recorded: audit.recordingId !== undefined }).toEqual({ container: goValuesOf(seen.target).container?.[0], recorded: true });
        }
        expect(statusOf(answer)).toBe(400);
        expect(bodyOf(answer)).toMatchObject({ kind: 'Status', code: 400, reason: 'BadRequest', message: expect.stringContaining('the query of a streaming request must be one the API server reads completely') });
        expect(seen).toBeUndefined();
      });
    });
  }

  describe('a query Go reads completely', () => {
    let rig: StreamRig;
    beforeAll(async () => {
      rig = await startStreamRig('passthrough', { recordingPolicy: POLICY('istio-proxy') });
    });
    afterAll(async () => {
      await rig?.close();
    });

    it("goes upstream as Go's own encoding of it; the policy, the recording and the audit read those values", async () => {
      const query = 'stdout=1&command=echo&command=a+b%2Bc&command=%23x#y&container=app&tty';
      const answer = await rig.send(`POST /api/v1/namespaces/default/pods/p2/exec?${query} HTTP/1.1\r\nHost: proxy\r\n${SPDY}\r\n`, upgraded);
      expect(statusOf(answer)).toBe(101);
      const seen = await waitFor('the upstream request', async () => rig.upstream.requests.find((r) => r.path.endsWith('/pods/p2/exec')), 5_000, 20);
      expect(seen.target).toBe('/api/v1/namespaces/default/pods/p2/exec?command=echo&command=a+b%2Bc&command=%23x%23y&container=app&stdout=1&tty=');
      expect(goValuesOf(seen.target)).toEqual({ stdout: ['1'], command: ['echo', 'a b+c', '#x#y'], container: ['app'], tty: [''] });
      const audit = await rig.auditOf('p2');
      expect(audit).toMatchObject({ container: 'app', command: ['echo', 'a b+c', '#x#y'] });
      // The recording (the policy's decision: recorded, not exempt) names the same command and container.
      const header = await waitFor(
        'the cast header',
        async () => {
          try {
            return JSON.parse(readFileSync(join(rig.recordingDir!, `${audit.recordingId}.cast`), 'utf8').split('\n')[0]!) as Record<string, any>;
          } catch {
            return undefined;
          }
        },
        5_000,
        20,
      );
      expect(JSON.stringify(header)).toContain(JSON.stringify(['echo', 'a b+c', '#x#y']));
      expect(JSON.stringify(header)).toContain('"app"');
    });
  });
});
