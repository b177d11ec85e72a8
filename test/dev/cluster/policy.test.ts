import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicyFile, parsePolicy, PolicyAuthorizer, PolicyFileError } from '../../../dev/cluster/policy.js';
import { requestAttributes } from '../../../dev/cluster/request-attributes.js';

const policy = new PolicyAuthorizer(
  parsePolicy({
    rules: [
      { users: ['alice'], verbs: ['get', 'list', 'watch', 'create'], resources: ['pods', 'pods/exec', 'pods/attach', 'pods/portforward'], namespaces: ['default'] },
      { groups: ['readers'], verbs: ['get'], resources: ['pods/exec'], namespaces: ['default'], names: ['demo'] },
      { groups: ['admins'], verbs: ['*'], resources: ['*'] },
      { users: ['carol'], verbs: ['get'], resources: ['*/log'] },
      { users: ['carol'], verbs: ['get', 'list'], resources: ['nodes'] },
      { users: ['dave'], verbs: ['get'], nonResourceURLs: ['/metrics', '/logs/*'] },
      { users: ['erin'], verbs: ['create'], resources: ['tokenreviews'], apiGroups: ['authentication.k8s.io'] },
    ],
  }),
);
const user = (name: string, ...groups: string[]) => ({ name, groups: [...groups, 'system:authenticated'] });
const allowed = (who: ReturnType<typeof user>, method: string, url: string) => policy.authorize(requestAttributes(method, url, who)).allowed;

describe('PolicyAuthorizer', () => {
  it.each([
    ['alice', [], 'GET', '/api/v1/namespaces/default/pods', true],
    ['alice', [], 'POST', '/api/v1/namespaces/default/pods/demo/exec', true],
    ['alice', [], 'DELETE', '/api/v1/namespaces/default/pods/demo', false],
    ['alice', [], 'GET', '/api/v1/namespaces/kube-system/pods', false],
    ['alice', [], 'GET', '/api/v1/pods', false], // namespaces listed: cluster-wide list not covered
    ['alice', [], 'GET', '/api/v1/namespaces/default/pods/demo/log', false], // "pods" does not cover subresources
    ['bob', ['readers'], 'GET', '/api/v1/namespaces/default/pods/demo/exec', true],
    ['bob', ['readers'], 'GET', '/api/v1/namespaces/default/pods/other/exec', false],
    ['bob', ['readers'], 'POST', '/api/v1/namespaces/default/pods/demo/exec', false],
    ['root', ['admins'], 'DELETE', '/api/v1/namespaces/x/pods', true],
    ['root', ['admins'], 'GET', '/foo', false], // resources "*" does not grant non-resource paths
    ['carol', [], 'GET', '/api/v1/namespaces/default/pods/demo/log', true],
    ['carol', [], 'GET', '/api/v1/namespaces/default/pods/demo', false],
    ['carol', [], 'GET', '/api/v1/nodes/dev-node', true],
    ['dave', [], 'GET', '/metrics', true],
    ['dave', [], 'GET', '/logs/kubelet.log', true],
    ['dave', [], 'POST', '/metrics', false],
    ['erin', [], 'POST', '/apis/authentication.k8s.io/v1/tokenreviews', true],
    ['nobody', [], 'GET', '/api', true], // built-in discovery
    ['nobody', [], 'GET', '/apis/authorization.k8s.io/v1', true],
    ['nobody', [], 'GET', '/version', true],
    ['nobody', [], 'GET', '/openapi/v3/api/v1', true],
    ['nobody', [], 'GET', '/metrics', false],
    ['nobody', [], 'GET', '/api/v1/namespaces', false],
  ] as const)('%s %j %s %s → %s', (name, groups, method, url, want) => {
    expect(allowed(user(name, ...groups), method, url)).toBe(want);
  });

  it('gives discovery only to authenticated users, and a reason for allows', () => {
    expect(policy.authorize(requestAttributes('GET', '/api', { name: 'x', groups: [] })).allowed).toBe(false);
    expect(policy.authorize(requestAttributes('GET', '/api/v1/namespaces/default/pods', user('alice')))).toEqual({
      allowed: true,
      reason: 'allowed by dev-cluster policy rule 0',
    });
    expect(policy.authorize(requestAttributes('GET', '/api/v1/nodes', user('alice')))).toEqual({ allowed: false, reason: '' });
  });
});

describe('policy file validation', () => {
  it.each([
    [[], 'p: expected an object with a "rules" array'],
    [{ rules: [{ verbs: ['get'] }] }, 'p: rules[0]: needs "resources" or "nonResourceURLs"'],
    [{ rules: [{ resources: ['pods'] }] }, 'p: rules[0].verbs: required'],
    [{ rules: [{ verbs: ['get'], resources: 'pods' }] }, 'p: rules[0].resources: expected an array of strings'],
    [{ rules: [{ verbs: ['get'], resources: ['pods'], user: ['x'] }] }, 'p: rules[0]: unknown field "user"'],
  ])('refuses %j', (doc, message) => {
    expect(() => parsePolicy(doc, 'p')).toThrow(new PolicyFileError(message));
  });

  it('loads a file and reports bad JSON with the path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'policy-'));
    try {
      writeFileSync(join(dir, 'ok.json'), '{"rules":[{"users":["a"],"verbs":["get"],"resources":["pods"]}]}');
      writeFileSync(join(dir, 'bad.json'), '{"rules":');
      expect(loadPolicyFile(join(dir, 'ok.json')).rules).toHaveLength(1);
      expect(() => loadPolicyFile(join(dir, 'bad.json'))).toThrow(/bad\.json: not valid JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
