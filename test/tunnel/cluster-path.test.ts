/** The `/clusters/NAME` prefix, the agent token table and the reconnect delays: pure pieces. */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IncomingMessage } from 'node:http';
import { clusterOf, rewriteClusterUrl, splitClusterTarget, targetInCluster } from '../../src/tunnel/cluster-path.js';
import { AgentTokenFile, parseAgentTokens } from '../../src/tunnel/agent-tokens.js';
import { reconnectDelayMs, RECONNECT_CAP_MS } from '../../src/tunnel/backoff.js';
import { isValidClusterName } from '../../src/tunnel/protocol.js';

describe('splitClusterTarget', () => {
  it.each([
    ['/clusters/one/api/v1/pods?watch=1', { cluster: 'one', rest: '/api/v1/pods?watch=1' }],
    ['/clusters/one', { cluster: 'one', rest: '/' }],
    ['/clusters/one?x=1', { cluster: 'one', rest: '/?x=1' }],
    ['/clusters/a.b-c/api', { cluster: 'a.b-c', rest: '/api' }],
  ])('%s', (url, want) => expect(splitClusterTarget(url)).toEqual(want));

  it.each(['/api/v1/pods', '/clusters/', '/clusters//api', '/clusters/One/api', '/clusters/o%6ee/api', '/clusters/../metrics', '/clustersone/api', '/clusters/-a/api'])(
    '%s is not a cluster target',
    (url) => expect(splitClusterTarget(url)).toBeUndefined(),
  );

  it('cluster names are DNS-1123 subdomains', () => {
    expect(isValidClusterName('a'.repeat(253))).toBe(true);
    expect(isValidClusterName('a'.repeat(254))).toBe(false);
    expect(isValidClusterName('a_b')).toBe(false);
  });
});

describe('rewriteClusterUrl', () => {
  const req = (url: string): IncomingMessage => ({ url }) as IncomingMessage;
  it('strips the prefix and remembers the cluster', () => {
    const r = req('/clusters/one/api/v1/namespaces/default/pods/alpha/exec?command=true');
    expect(rewriteClusterUrl(r, ['/healthz'])).toBe('/api/v1/namespaces/default/pods/alpha/exec?command=true');
    expect(clusterOf(r)).toBe('one');
  });
  it('keeps the prefix on paths the proxy serves itself, so they reach the cluster', () => {
    const r = req('/clusters/one/healthz?verbose');
    expect(rewriteClusterUrl(r, ['/healthz'])).toBe('/clusters/one/healthz?verbose');
    expect(clusterOf(r)).toBe('one');
    expect(targetInCluster('/clusters/one/healthz?verbose')).toBe('/healthz?verbose');
  });
  it('leaves other requests alone', () => {
    const r = req('/api');
    expect(rewriteClusterUrl(r, [])).toBe('/api');
    expect(clusterOf(r)).toBeUndefined();
  });
});

describe('agent tokens', () => {
  it('parses token,cluster lines with comments and blank lines', () => {
    expect([...parseAgentTokens('# c\n\nt1,one\n"t2" , two\n')]).toEqual([
      ['t1', 'one'],
      ['t2', 'two'],
    ]);
  });
  it.each([
    ['t1\n', /line 1: want token,cluster-name/],
    ['t1,One\n', /line 1: invalid cluster name/],
    ['t1,a\nt1,b\n', /line 2: duplicate token/],
  ])('refuses %j', (text, re) => expect(() => parseAgentTokens(text)).toThrow(re));

  it('re-reads the file when it changes and keeps the last good table on a bad edit', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-tokens-'));
    try {
      const path = join(dir, 'tokens.csv');
      writeFileSync(path, 'old,one\n');
      const file = new AgentTokenFile(path);
      expect(file.clusterFor('old')).toBe('one');
      writeFileSync(path, 'new,two\n');
      utimesSync(path, new Date(), new Date(Date.now() + 5_000));
      expect(file.clusterFor('old')).toBeUndefined();
      expect(file.clusterFor('new')).toBe('two');
      writeFileSync(path, 'broken\n');
      utimesSync(path, new Date(), new Date(Date.now() + 10_000));
      expect(file.clusterFor('new')).toBe('two');
      expect(file.lastError).toMatch(/line 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('reconnectDelayMs', () => {
  it('doubles from 1 s with equal jitter and never exceeds 30 s', () => {
    expect([0, 1, 2, 3].map((a) => reconnectDelayMs(a, 0))).toEqual([500, 1000, 2000, 4000]);
    expect([0, 1, 2, 3].map((a) => reconnectDelayMs(a, 0.999999))).toEqual([1000, 2000, 4000, 8000]);
    expect(reconnectDelayMs(50, 0.999999)).toBe(RECONNECT_CAP_MS);
    expect(reconnectDelayMs(50, 0)).toBe(RECONNECT_CAP_MS / 2);
  });
  it('spreads 100 agents restarting at once over more than 100 ms', () => {
    const delays = Array.from({ length: 100 }, () => reconnectDelayMs(0, Math.random())).sort((a, b) => a - b);
    expect(delays[99]! - delays[0]!).toBeGreaterThan(100);
  });
});
