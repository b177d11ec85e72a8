import { describe, expect, it } from 'vitest';
import { kubeletStreamPath } from '../../../../src/routing/kubelet/kubelet-location.js';
import { kubeletAddress } from '../../../../src/routing/kubelet/node-address.js';

const pod = { nodeName: 'node-1', containers: ['app'] };
const q = (s: string): URLSearchParams => new URLSearchParams(s);

describe('kubeletStreamPath', () => {
  it("rewrites exec as kube-apiserver does: kubelet's input/output/error/tty, command lines, container in the path", () => {
    expect(kubeletStreamPath('exec', 'default', 'demo', pod, q('command=sh&command=-c&command=echo%20hi&stdin=true&stdout=true&stderr=true&tty=false'))).toEqual({
      ok: true,
      path: '/exec/default/demo/app?input=1&output=1&error=1&command=sh&command=-c&command=echo+hi',
    });
  });

  it('attach with tty drops stderr; an explicit container must exist', () => {
    expect(kubeletStreamPath('attach', 'ns', 'p', { nodeName: 'n', containers: ['a', 'b'] }, q('container=b&stdin=1&stdout=1&stderr=1&tty=1'))).toEqual({
      ok: true,
      path: '/attach/ns/p/b?input=1&output=1&tty=1',
    });
    const bad = kubeletStreamPath('attach', 'ns', 'p', pod, q('container=x&stdout=1'));
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.status).toMatchObject({ code: 400, reason: 'BadRequest', message: 'container x is not valid for pod p' });
  });

  it('needs a container name when the pod has several, and a node', () => {
    const many = kubeletStreamPath('exec', 'ns', 'p', { nodeName: 'n', containers: ['a', 'b'] }, q('command=sh&stdout=1'));
    if (many.ok) throw new Error('expected a refusal');
    expect(many.status.message).toBe('a container name must be specified for pod p, choose one of: [a b]');
    const unscheduled = kubeletStreamPath('exec', 'ns', 'p', { containers: ['a'] }, q('command=sh&stdout=1'));
    if (unscheduled.ok) throw new Error('expected a refusal');
    expect(unscheduled.status.message).toBe('pod p does not have a host assigned');
    const noStream = kubeletStreamPath('exec', 'ns', 'p', pod, q('command=sh'));
    if (noStream.ok) throw new Error('expected a refusal');
    expect(noStream.status.code).toBe(400);
  });

  it('port-forward goes to /portForward/NS/POD with the ports in one port value', () => {
    expect(kubeletStreamPath('portforward', 'default', 'demo', pod, q('ports=8080&ports=9090'))).toEqual({ ok: true, path: '/portForward/default/demo?port=8080%2C9090' });
    expect(kubeletStreamPath('portforward', 'default', 'demo', pod, q(''))).toEqual({ ok: true, path: '/portForward/default/demo' });
    expect(kubeletStreamPath('portforward', 'default', 'demo', pod, q('ports=70000')).ok).toBe(false);
  });
});

describe('kubeletAddress', () => {
  const node = { addresses: [{ type: 'InternalIP', address: '10.0.0.5' }, { type: 'Hostname', address: 'node-1' }], kubeletPort: 10255 };
  it('takes the first preferred type the node reports, and the daemon endpoint port', () => {
    expect(kubeletAddress(node)).toEqual({ host: 'node-1', port: 10255 });
    expect(kubeletAddress(node, ['InternalIP', 'Hostname'])).toEqual({ host: '10.0.0.5', port: 10255 });
    expect(kubeletAddress({ addresses: [{ type: 'InternalIP', address: '10.0.0.5' }] }, ['InternalIP'])).toEqual({ host: '10.0.0.5', port: 10250 });
    expect(kubeletAddress(node, ['ExternalIP'])).toBeUndefined();
  });
});
