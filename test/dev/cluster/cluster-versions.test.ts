/**
 * The versions the dev cluster plays and what each does with WebSocket streaming (`cluster-versions.ts`).
 */
import { describe, expect, it } from 'vitest';
import {
  apiserverExtendsWebSocketsToKubelet,
  apiserverTranslates,
  clusterVersions,
  declaredFeatures,
  gitVersion,
  kubeletServesWebSockets,
  parseMinorVersion,
} from '../../../dev/cluster/cluster-versions.js';

describe('parseMinorVersion', () => {
  it.each([
    ['1.35', 35],
    ['v1.35', 35],
    ['v1.35.2', 35],
    [' 1.20 ', 20],
    ['1.38', 38],
  ])('%j → %i', (text, minor) => {
    expect(parseMinorVersion(text, '--kubelet-version')).toBe(minor);
  });

  it.each(['1.19', '1.39', '2.1', '1', '1.35.0.1', 'v1.x', '', '135', '1.3a'])('refuses %j, naming the flag and the range', (text) => {
    expect(() => parseMinorVersion(text, '--kubelet-version')).toThrow(`--kubelet-version: want a Kubernetes version 1.20 to 1.38 (e.g. 1.35 or v1.35.0), got ${JSON.stringify(text)}`);
  });
});

describe('clusterVersions', () => {
  it('defaults both to 1.36, the kubelet to the apiserver', () => {
    expect(clusterVersions(undefined, undefined)).toEqual({ apiserver: 36, kubelet: 36 });
    expect(clusterVersions('1.29', undefined)).toEqual({ apiserver: 29, kubelet: 29 });
    expect(clusterVersions(undefined, '1.35')).toEqual({ apiserver: 36, kubelet: 35 });
  });

  it('refuses a kubelet newer than its apiserver (version skew policy)', () => {
    expect(() => clusterVersions('1.35', '1.36')).toThrow('kubeletVersion 1.36 is newer than apiserverVersion 1.35: a kubelet may not be newer than its kube-apiserver');
    expect(() => clusterVersions('1.35', '1.36', { apiserver: '--apiserver-version', kubelet: '--kubelet-version' })).toThrow(/^--kubelet-version 1\.36 is newer than --apiserver-version 1\.35/);
  });
});

describe('what each version does', () => {
  it.each([
    [29, false, false, false, false],
    [30, true, false, false, false],
    [31, true, true, false, false],
    [35, true, true, false, false],
    [36, true, true, true, true],
    [38, true, true, true, true],
  ])('1.%i: apiserver translates v5 %s, the tunnel %s; passes WebSockets to a declaring kubelet %s; kubelet serves them %s', (minor, v5, tunnel, extends_, serves) => {
    expect(apiserverTranslates(minor, 'exec')).toBe(v5);
    expect(apiserverTranslates(minor, 'attach')).toBe(v5);
    expect(apiserverTranslates(minor, 'portforward')).toBe(tunnel);
    expect(apiserverExtendsWebSocketsToKubelet(minor)).toBe(extends_);
    expect(kubeletServesWebSockets(minor)).toBe(serves);
    expect(declaredFeatures(minor)).toEqual(serves ? ['ExtendWebSocketsToKubelet'] : []);
    expect(gitVersion(minor)).toBe(`v1.${minor}.0`);
  });
});
