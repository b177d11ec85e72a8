import { describe, expect, it } from 'vitest';
import { forbiddenMessage, forbiddenStatus, requestAttributes } from '../../../dev/cluster/request-attributes.js';
import { encodeStatus } from '../../../src/status.js';

const bob = { name: 'bob', groups: ['system:authenticated'] };
const pick = (method: string, url: string) => {
  const a = requestAttributes(method, url, bob);
  return { verb: a.verb, resourceRequest: a.resourceRequest, apiGroup: a.apiGroup, namespace: a.namespace, resource: a.resource, subresource: a.subresource, name: a.name };
};
const res = (verb: string, namespace: string, resource: string, name = '', subresource = '', apiGroup = '') => ({
  verb, resourceRequest: true, apiGroup, namespace, resource, subresource, name,
});
const nonRes = (verb: string) => ({ verb, resourceRequest: false, apiGroup: '', namespace: '', resource: '', subresource: '', name: '' });

describe('requestAttributes (requestinfo.go)', () => {
  it.each([
    ['GET', '/api/v1/namespaces/default/pods/demo', res('get', 'default', 'pods', 'demo')],
    ['HEAD', '/api/v1/namespaces/default/pods/demo', res('get', 'default', 'pods', 'demo')],
    ['GET', '/api/v1/namespaces/default/pods', res('list', 'default', 'pods')],
    ['GET', '/api/v1/pods', res('list', '', 'pods')],
    ['GET', '/api/v1/namespaces/default/pods?watch=true', res('watch', 'default', 'pods')],
    ['GET', '/api/v1/namespaces/default/pods?watch=1&fieldSelector=metadata.name%3Ddemo', res('watch', 'default', 'pods', 'demo')],
    ['GET', '/api/v1/namespaces/default/pods?watch=false', res('list', 'default', 'pods')],
    ['GET', '/api/v1/watch/namespaces/default/pods', res('watch', 'default', 'pods')],
    ['POST', '/api/v1/namespaces/default/pods', res('create', 'default', 'pods')],
    ['DELETE', '/api/v1/namespaces/default/pods/demo', res('delete', 'default', 'pods', 'demo')],
    ['DELETE', '/api/v1/namespaces/default/pods', res('deletecollection', 'default', 'pods')],
    ['PUT', '/api/v1/namespaces/default/pods/demo', res('update', 'default', 'pods', 'demo')],
    ['PATCH', '/api/v1/namespaces/default/pods/demo', res('patch', 'default', 'pods', 'demo')],
    ['POST', '/api/v1/namespaces/default/pods/demo/exec?command=ls', res('create', 'default', 'pods', 'demo', 'exec')],
    ['GET', '/api/v1/namespaces/default/pods/demo/exec?command=ls', res('get', 'default', 'pods', 'demo', 'exec')],
    ['GET', '/api/v1/namespaces/default/pods/demo/portforward', res('get', 'default', 'pods', 'demo', 'portforward')],
    ['GET', '/api/v1/namespaces/default/pods/demo/log', res('get', 'default', 'pods', 'demo', 'log')],
    ['GET', '/api/v1/namespaces/default', res('get', 'default', 'namespaces', 'default')],
    ['GET', '/api/v1/namespaces', res('list', '', 'namespaces')],
    ['PUT', '/api/v1/namespaces/x/finalize', res('update', 'x', 'namespaces', 'x', 'finalize')],
    ['GET', '/api/v1/nodes', res('list', '', 'nodes')],
    ['GET', '/api/v1/nodes/dev-node', res('get', '', 'nodes', 'dev-node')],
    ['POST', '/apis/authentication.k8s.io/v1/tokenreviews', res('create', '', 'tokenreviews', '', '', 'authentication.k8s.io')],
    ['POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', res('create', '', 'subjectaccessreviews', '', '', 'authorization.k8s.io')],
    // Go splits the decoded URL.Path: an encoded slash separates segments too.
    ['GET', '/api/v1/namespaces/my%20ns/pods/a%2Fb', res('get', 'my ns', 'pods', 'a', 'b')],
    ['GET', '/version', nonRes('get')],
    ['GET', '/api', nonRes('get')],
    ['GET', '/api/v1', nonRes('get')],
    ['GET', '/apis', nonRes('get')],
    ['GET', '/apis/authentication.k8s.io', nonRes('get')],
    ['GET', '/apis/authentication.k8s.io/v1', nonRes('get')],
    ['GET', '/openapi/v2', nonRes('get')],
    ['POST', '/healthz/foo/bar', nonRes('post')],
  ])('%s %s', (method, url, want) => {
    expect(pick(method, url)).toEqual(want);
  });
});

describe('forbidden answers', () => {
  it('words the resource message as the apiserver', () => {
    const a = requestAttributes('POST', '/api/v1/namespaces/default/pods/demo/exec', bob);
    expect(forbiddenMessage(a)).toBe('User "bob" cannot create resource "pods/exec" in API group "" in the namespace "default"');
    expect(encodeStatus(forbiddenStatus(a)).toString()).toBe(
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",' +
        '"message":"pods \\"demo\\" is forbidden: User \\"bob\\" cannot create resource \\"pods/exec\\" in API group \\"\\" in the namespace \\"default\\"",' +
        '"reason":"Forbidden","details":{"name":"demo","kind":"pods"},"code":403}',
    );
  });
  it('words cluster-scoped, grouped and unnamed requests', () => {
    expect(forbiddenStatus(requestAttributes('GET', '/api/v1/nodes', bob)).message).toBe(
      'nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope',
    );
    const tr = forbiddenStatus(requestAttributes('POST', '/apis/authentication.k8s.io/v1/tokenreviews', bob));
    expect(tr.message).toBe(
      'tokenreviews.authentication.k8s.io is forbidden: User "bob" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope',
    );
    expect(tr.details).toEqual({ group: 'authentication.k8s.io', kind: 'tokenreviews' });
  });
  it('words non-resource paths and sanitizes HTML characters', () => {
    const s = forbiddenStatus(requestAttributes('GET', '/foo/<b>', bob));
    expect(s.message).toBe('forbidden: User "bob" cannot get path "/foo/&lt;b&gt;"');
    expect(s.details).toEqual({});
  });
  it('appends a non-empty reason quoted', () => {
    expect(forbiddenStatus(requestAttributes('GET', '/api/v1/nodes', bob), 'no').message).toMatch(/at the cluster scope: "no"$/);
  });
});
