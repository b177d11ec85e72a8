import { describe, expect, it } from 'vitest';
import { endpointsOf, pickEndpoint } from '../../../src/aggregation/service-endpoints.js';

const ref = { namespace: 'kube-system', name: 'metrics-server', port: 443 };
const service = { type: 'ClusterIP', ports: [{ name: 'https', port: 443 }] };

describe('endpointsOf: kube-aggregator resolution and availability reasons', () => {
  it('gives each failure its reason and message', () => {
    expect(endpointsOf(ref, undefined, [])).toEqual({ ok: false, reason: 'ServiceNotFound', message: 'service/metrics-server in "kube-system" is not present' });
    expect(endpointsOf(ref, { type: 'ExternalName', ports: [] }, [])).toMatchObject({ ok: false, reason: 'ServicePortError' });
    expect(endpointsOf(ref, { type: 'ClusterIP', ports: [{ name: 'http', port: 80 }] }, [])).toEqual({ ok: false, reason: 'ServicePortError', message: 'service/metrics-server in "kube-system" is not listening on port 443' });
    expect(endpointsOf(ref, service, [])).toEqual({ ok: false, reason: 'EndpointsNotFound', message: 'cannot find endpoints for service/metrics-server in "kube-system"' });
    expect(endpointsOf(ref, service, [{ ports: [{ name: 'https', port: 10250 }], endpoints: [{ addresses: ['10.0.0.1'], ready: false }] }])).toEqual({
      ok: false,
      reason: 'MissingEndpoints',
      message: 'endpoints for service/metrics-server in "kube-system" have no addresses with port name "https"',
    });
    expect(endpointsOf(ref, service, [{ ports: [{ name: 'metrics', port: 10250 }], endpoints: [{ addresses: ['10.0.0.1'], ready: true }] }])).toMatchObject({ reason: 'MissingEndpoints' });
  });

  it('collects every ready address of the named port across slices; picks at random', () => {
    const r = endpointsOf(ref, service, [
      { ports: [{ name: 'https', port: 10250 }], endpoints: [{ addresses: ['10.0.0.1'], ready: true }, { addresses: ['10.0.0.2'], ready: false }] },
      { ports: [{ name: 'https', port: 10251 }], endpoints: [{ addresses: ['10.0.0.3', '10.0.0.4'], ready: true }] },
    ]);
    expect(r).toEqual({ ok: true, endpoints: [{ host: '10.0.0.1', port: 10250 }, { host: '10.0.0.3', port: 10251 }, { host: '10.0.0.4', port: 10251 }] });
    if (!r.ok) throw new Error('unreachable');
    expect(pickEndpoint(r.endpoints, () => 0)).toEqual({ host: '10.0.0.1', port: 10250 });
    expect(pickEndpoint(r.endpoints, () => 0.99)).toEqual({ host: '10.0.0.4', port: 10251 });
  });
});
