import { describe, expect, it } from 'vitest';
import { isStreamingPath, nodeProxyStreamOf, podStreamAttributes, streamReviewAttributes } from '../../../src/routing/request-path.js';

describe('nodeProxyStreamOf: the kubelet streaming endpoints through nodes/proxy, in every form the upstream acts on', () => {
  it.each([
    ['/api/v1/nodes/n1/proxy/exec/ns/p/c?command=id', { node: 'n1', endpoint: 'exec', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/exec/ns/p/uid-1/c', { node: 'n1', endpoint: 'exec', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/attach/ns/p/c', { node: 'n1', endpoint: 'attach', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/run/ns/p/c?cmd=id', { node: 'n1', endpoint: 'run', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/portForward/ns/p?port=80', { node: 'n1', endpoint: 'portforward', target: { namespace: 'ns', pod: 'p' } }],
    ['/api/v1/nodes/n1/proxy/portForward/ns/p/uid-1', { node: 'n1', endpoint: 'portforward', target: { namespace: 'ns', pod: 'p' } }],
    ['/api/v1/nodes/n1/proxy/cri/exec/T0k3n', { node: 'n1', endpoint: 'cri' }],
    ['/api/v1/nodes/n1/proxy/exec/ns', { node: 'n1', endpoint: 'exec' }],
    // Name forms kube-apiserver's node proxy accepts (SplitSchemeNamePort): authorized as written.
    ['/api/v1/nodes/n1:10250/proxy/exec/ns/p/c', { node: 'n1:10250', endpoint: 'exec' }],
    ['/api/v1/nodes/https:n1:10250/proxy/exec/ns/p/c', { node: 'https:n1:10250', endpoint: 'exec' }],
    ['/api/v1/nodes/n%31/proxy/exec/ns/p/c', { node: 'n1', endpoint: 'exec' }],
    // Encodings, dot segments, doubled slashes, case.
    ['/api/v1/nodes/n1/proxy/%65xec/ns/p/c', { endpoint: 'exec', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/./exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy/x/../exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy/../../exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy/%2E%2E/exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy//exec//ns/p/c/', { endpoint: 'exec', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy%2Fexec%2Fns%2Fp%2Fc', { endpoint: 'exec', target: { namespace: 'ns', pod: 'p', container: 'c' } }],
    ['/api/v1/nodes/n1/proxy/EXEC/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy/PortForward/ns/p', { endpoint: 'portforward' }],
    ['/api/v1//nodes/n1/proxy/exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/x/../proxy/exec/ns/p/c', { endpoint: 'exec' }],
    ['/api/v1/nodes/n1/proxy/exec%ZZ/ns/p/c', undefined],
  ])('%s', (url, expected) => {
    const got = nodeProxyStreamOf(url);
    if (expected === undefined) expect(got).toBeUndefined();
    else expect(got).toMatchObject(expected);
  });

  it.each([
    '/api/v1/nodes/n1/proxy/containerLogs/ns/p/c',
    '/api/v1/nodes/n1/proxy/metrics/resource',
    '/api/v1/nodes/n1/proxy/stats/summary',
    '/api/v1/nodes/n1/proxy/',
    '/api/v1/nodes/n1/proxy',
    '/api/v1/nodes/n1',
    '/api/v1/nodes/n1/proxy/exec-not/ns/p/c',
    '/api/v1/namespaces/ns/pods/p/proxy/exec/ns/p/c',
    '/api/v1/nodes/n1/proxy/containerLogs/ns/p/c?x=/exec/ns/p/c',
  ])('%s is not one', (url) => {
    expect(nodeProxyStreamOf(url)).toBeUndefined();
  });
});

describe('streamReviewAttributes', () => {
  it('pods/exec|attach|portforward: create on the subresource in the namespace', () => {
    expect(streamReviewAttributes('/api/v1/namespaces/ns/pods/p/attach?stdout=1')).toEqual({ verb: 'create', resource: 'pods', subresource: 'attach', namespace: 'ns', name: 'p' });
    expect(podStreamAttributes('/api/v1/namespaces/ns/pods/p/attach')).toEqual({ namespace: 'ns', name: 'p', subresource: 'attach' });
  });

  it('AuthorizePodWebsocketUpgradeCreatePermission off: a GET (a WebSocket upgrade) is reviewed as `get`, as kube-apiserver < 1.35; a POST stays `create`', () => {
    const url = '/api/v1/namespaces/ns/pods/p/exec?command=true';
    expect(streamReviewAttributes(url, { method: 'GET', createForWebSocketUpgrade: false })).toEqual({ verb: 'get', resource: 'pods', subresource: 'exec', namespace: 'ns', name: 'p' });
    expect(streamReviewAttributes(url, { method: 'POST', createForWebSocketUpgrade: false })?.verb).toBe('create');
    expect(streamReviewAttributes(url, { method: 'GET', createForWebSocketUpgrade: true })?.verb).toBe('create');
    expect(streamReviewAttributes(url, { method: 'GET' })?.verb).toBe('create');
    // The node proxy's streams are not what the gate is about: `create` whatever the method.
    expect(streamReviewAttributes('/api/v1/nodes/n1/proxy/exec/ns/p/c', { method: 'GET', createForWebSocketUpgrade: false })?.verb).toBe('create');
  });

  it('a kubelet stream through the node proxy: create on nodes/proxy for the node as named', () => {
    expect(streamReviewAttributes('/api/v1/nodes/https:n1:10250/proxy/%65xec/ns/p/c')).toEqual({ verb: 'create', resource: 'nodes', subresource: 'proxy', name: 'https:n1:10250' });
  });

  it('nothing else', () => {
    expect(streamReviewAttributes('/api/v1/nodes/n1/proxy/containerLogs/ns/p/c')).toBeUndefined();
    expect(streamReviewAttributes('/api/v1/namespaces/ns/pods/p/log')).toBeUndefined();
  });
});

describe('isStreamingPath', () => {
  it.each([
    ['/api/v1/namespaces/ns/pods/p/exec', true],
    ['/api/v1/namespaces/ns/pods/p/portforward/', true],
    ['/api/v1/namespaces/ns/pods/x/../p/exec', true],
    ['/api/v1/namespaces/ns/pods/p%2Fexec', true],
    ['/api/v1/nodes/n1/proxy/attach/ns/p/c', true],
    ['/api/v1/namespaces/ns/pods/p/log', false],
    ['/api/v1/namespaces/ns/pods', false],
    ['/apis/apps/v1/deployments', false],
  ])('%s → %s', (url, expected) => {
    expect(isStreamingPath(url)).toBe(expected);
  });
});
