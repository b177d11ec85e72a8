/**
 * Every object that `kubectl kustomize` renders from manifests/ — the base, the agent's base, and the
 * base with each Component and with both — passes the offline schema check of its kind
 * (test/manifests/manifest-schema.ts: the Kubernetes and Prometheus Operator JSON schemas, and no
 * unknown field in built-in kinds). And the check can fail: a wrong type, a missing required field,
 * an unknown field and an unknown kind are each reported.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';
import { schemaProblems, type ManifestObject } from './manifest-schema.js';
import { MANIFESTS, renderDir, renderWithComponents } from './render-manifests.js';

/** Every rendering a user can make of the repository's manifests. */
const RENDERINGS: { name: string; render: () => ManifestObject[] }[] = [
  { name: 'manifests/', render: () => renderDir(MANIFESTS) },
  { name: 'manifests/agent/', render: () => renderDir(join(MANIFESTS, 'agent')) },
  { name: 'manifests/ + proxy-agents', render: () => renderWithComponents(['proxy-agents']) },
  { name: 'manifests/ + autoscaling', render: () => renderWithComponents(['autoscaling']) },
  { name: 'manifests/ + autoscaling + proxy-agents', render: () => renderWithComponents(['autoscaling', 'proxy-agents']) },
];

describe.skipIf(kubectlE2eSkipReason() !== undefined)('every rendered object passes the schema of its kind', () => {
  for (const r of RENDERINGS) {
    it(r.name, async () => {
      const objects = r.render();
      expect(objects.length).toBeGreaterThan(4);
      const problems = (await Promise.all(objects.map((o) => schemaProblems(o)))).flat();
      expect(problems).toEqual([]);
    });
  }
});

describe('the schema check fails what it must', () => {
  const deployment = (spec: Record<string, unknown>): ManifestObject => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'd' },
    spec: { selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } }, ...spec },
  });

  it('passes a good Deployment', async () => {
    expect(await schemaProblems(deployment({ replicas: 2 }))).toEqual([]);
  });

  it('a wrong type, a missing required field', async () => {
    expect(await schemaProblems(deployment({ replicas: 'two' }))).toEqual([expect.stringMatching(/^apps\/v1 Deployment d: .*spec\/replicas must be integer/)]);
    const noName = deployment({});
    (noName.spec as { template: { spec: { containers: object[] } } }).template.spec.containers = [{ image: 'i' }];
    expect(await schemaProblems(noName)).toEqual([expect.stringMatching(/containers\/0 must have required property name/)]);
  });

  it('an unknown field, deep in a built-in kind', async () => {
    const hpa: ManifestObject = {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: 'h' },
      spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'd' }, maxReplicas: 3, behaviour: { scaleDown: {} } },
    };
    expect(await schemaProblems(hpa)).toEqual(['autoscaling/v2 HorizontalPodAutoscaler h: unknown field spec.behaviour']);
    const probe = deployment({});
    (probe.spec as { template: { spec: { containers: object[] } } }).template.spec.containers = [{ name: 'c', readinessProbe: { httpGet: { port: 8443, pth: '/readyz' } } }];
    expect(await schemaProblems(probe)).toEqual(['apps/v1 Deployment d: unknown field spec.template.spec.containers[0].readinessProbe.httpGet.pth']);
  });

  it('a PrometheusRule against the operator CRD schema', async () => {
    const rule = (groups: unknown): ManifestObject => ({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule', metadata: { name: 'r' }, spec: { groups } });
    expect(await schemaProblems(rule([{ name: 'g', rules: [{ alert: 'A', expr: 'up == 0', for: '5m', labels: { severity: 'warning' } }] }]))).toEqual([]);
    expect(await schemaProblems(rule([{ rules: [{ alert: 'A', expr: 'up == 0', for: 'five minutes' }] }]))).toEqual([
      expect.stringMatching(/groups\/0 must have required property name.*rules\/0\/for must match pattern/),
    ]);
  });

  it('a kind nobody has a schema for', async () => {
    expect(await schemaProblems({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).toEqual(['example.com/v1 Widget w: no schema for this apiVersion and kind']);
    expect(await schemaProblems({ apiVersion: 'apps/v1', kind: 'Deploymnet', metadata: { name: 'w' } })).toEqual(['apps/v1 Deploymnet w: no schema for this apiVersion and kind']);
  });
});
