/**
 * The recording policy's decision function (pure), table-tested: first match wins, default none,
 * globs, groups, tty, subresources, and unknown attributes on the safe side.
 */
import { describe, expect, it } from 'vitest';
import { compilePattern, decideRecording, RECORD_NOTHING, type RecordingRequest } from '../../../src/recording/policy.js';
import { parseRecordingConfig } from '../../../src/recording/recording-config.js';

const policy = parseRecordingConfig({
  apiVersion: 'kube-stream-proxy.io/v1alpha1',
  kind: 'SessionRecordingConfiguration',
  rules: [
    { name: 'exempt-ci', match: { users: ['system:serviceaccount:ci:*'] }, record: 'none' },
    { name: 'exempt-debug-container', match: { containers: ['debugger'] }, record: 'none' },
    { name: 'prod', match: { namespaces: ['prod-*'], subresources: ['exec', 'attach'] }, record: 'full', enforce: true },
    { name: 'sre-tty', match: { groups: ['sre'], tty: true }, record: 'output' },
    { name: 'cluster-two', match: { clusters: ['two'] }, record: 'output' },
    { name: 'own-upstream-db', match: { clusters: [''], pods: ['db-*'] }, record: 'output' },
    { name: 'alice', match: { users: ['alice'] }, record: 'output' },
    { name: 'pf', match: { subresources: ['portforward'], namespaces: ['pf'] }, record: 'output' },
  ],
});

const base: RecordingRequest = { user: 'bob', groups: ['system:authenticated'], namespace: 'default', pod: 'demo', subresource: 'exec', tty: false };

describe('decideRecording', () => {
  it.each<[string, Partial<RecordingRequest>, { record: string; enforce: boolean; rule?: string }]>([
    ['no rule matches: nothing recorded', {}, { record: 'none', enforce: false }],
    ['prod exec: full, enforced', { namespace: 'prod-eu' }, { record: 'full', enforce: true, rule: 'prod' }],
    ['prod portforward: not the prod rule (subresources)', { namespace: 'prod-eu', subresource: 'portforward' }, { record: 'none', enforce: false }],
    ['first match wins: ci exempted even in prod', { namespace: 'prod-eu', user: 'system:serviceaccount:ci:deployer' }, { record: 'none', enforce: false, rule: 'exempt-ci' }],
    ['glob needs the prefix', { namespace: 'preprod-eu' }, { record: 'none', enforce: false }],
    ['group + tty', { groups: ['sre'], tty: true }, { record: 'output', enforce: false, rule: 'sre-tty' }],
    ['group without tty', { groups: ['sre'], tty: false }, { record: 'none', enforce: false }],
    ['cluster two', { cluster: 'two' }, { record: 'output', enforce: false, rule: 'cluster-two' }],
    ['"" is the own upstream', { pod: 'db-0' }, { record: 'output', enforce: false, rule: 'own-upstream-db' }],
    ['own-upstream rule not for agents', { pod: 'db-0', cluster: 'one' }, { record: 'none', enforce: false }],
    ['user', { user: 'alice' }, { record: 'output', enforce: false, rule: 'alice' }],
    ['portforward rule', { namespace: 'pf', subresource: 'portforward' }, { record: 'output', enforce: false, rule: 'pf' }],
    // Unknown attributes: never exempt, always captured.
    ['unknown user (passthrough) in prod: not exempted by the ci rule', { user: undefined, groups: undefined, namespace: 'prod-eu' }, { record: 'full', enforce: true, rule: 'prod' }],
    ['unknown user elsewhere: recorded by the first user/group rule that records', { user: undefined, groups: undefined, tty: true }, { record: 'output', enforce: false, rule: 'sre-tty' }],
    ['unknown container: not exempted by the container rule', { container: undefined, namespace: 'prod-x' }, { record: 'full', enforce: true, rule: 'prod' }],
    ['named debugger container: exempted', { container: 'debugger', namespace: 'prod-x' }, { record: 'none', enforce: false, rule: 'exempt-debug-container' }],
  ])('%s', (_name, change, want) => {
    expect(decideRecording(policy, { ...base, ...change })).toEqual(want);
  });

  it('the empty policy records nothing', () => {
    expect(decideRecording(RECORD_NOTHING, { ...base, namespace: 'prod-eu' })).toEqual({ record: 'none', enforce: false });
  });
});

describe('compilePattern', () => {
  it.each<[string, string, boolean]>([
    ['abc', 'abc', true],
    ['abc', 'abcd', false],
    ['a*', 'a', true],
    ['a*', 'abc', true],
    ['*c', 'abc', true],
    ['a*c', 'ac', true],
    ['a*c', 'abbc', true],
    ['a*c', 'acb', false],
    ['a*b*c', 'abc', true],
    ['a*b*c', 'acbc', true],
    ['a*b*c', 'ac', false],
    ['ab*ba', 'aba', false],
    ['*', '', true],
    ['a.b', 'axb', false],
  ])('%s ~ %s = %s', (p, v, want) => {
    expect(compilePattern(p).test(v)).toBe(want);
  });
});
