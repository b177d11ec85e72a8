/**
 * The alerting rules (issue 24 item 3): manifests/alerts/kube-stream-proxy.rules.yaml is valid for
 * `promtool check rules`, passes its `promtool test rules` unit tests (test/manifests/
 * alert-rules.promtool.yaml: for every alert, series that fire it and series that must not), and
 * holds exactly the groups of the PrometheusRule that `kubectl kustomize manifests` renders. Each
 * alert carries a severity, a summary, a description and a runbook_url pointing at its own section
 * of docs/operations.md. Whether the rules name metrics the proxy really has is
 * test/manifests/alert-metrics.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadAllYaml, loadYaml } from '@kubernetes/client-node';
import { findKubectl, kubectlE2eSkipReason } from '../helpers/kubectl.js';
import { promqlReferences } from './promql-references.js';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES_FILE = join(ROOT, 'manifests/alerts/kube-stream-proxy.rules.yaml');
const UNIT_TESTS = join(ROOT, 'test/manifests/alert-rules.promtool.yaml');
const RENDER_SCRIPT = join(ROOT, 'manifests/alerts/render-prometheusrule.mjs');
const OPERATIONS = join(ROOT, 'docs/operations.md');

type Rule = { alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> };
type Groups = { groups: { name: string; rules: Rule[] }[] };
type UnitTests = { tests: { name: string; alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[] };

const plain = loadYaml(readFileSync(RULES_FILE, 'utf8')) as Groups;
const alerts = plain.groups.flatMap((g) => g.rules);

/** promtool from Debian's `prometheus` package, or a failure that says how to get it. */
function promtool(): string {
  const bin = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
  if (bin === '') {
    throw new Error(
      'promtool not found: install Debian\'s "prometheus" package (apt-get update && apt-get install -y prometheus); the pretest step of npm test (scripts/provision-test-tools.sh) installs it when missing',
    );
  }
  return bin;
}

function runPromtool(args: string[]): { status: number | null; output: string } {
  const r = spawnSync(promtool(), args, { encoding: 'utf8', cwd: ROOT });
  return { status: r.status, output: r.stdout + r.stderr };
}

/** GitHub's anchor of a Markdown heading. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

describe('alert rules (promtool)', () => {
  it('promtool check rules accepts the rules file', () => {
    const r = runPromtool(['check', 'rules', RULES_FILE]);
    expect(r, r.output).toMatchObject({ status: 0 });
    expect(r.output).toContain(`SUCCESS: ${alerts.length} rules found`);
  });

  it('promtool test rules: every unit test passes', () => {
    const r = runPromtool(['test', 'rules', UNIT_TESTS]);
    expect(r, r.output).toMatchObject({ status: 0 });
    expect(r.output).toMatch(/^\s+SUCCESS$/m);
  });

  it('the unit tests can fail: without its `for`, every alert that has one fails a test (each has a pending case)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-alert-mutant-'));
    try {
      writeFileSync(join(dir, 'rules.yaml'), readFileSync(RULES_FILE, 'utf8').replace(/^\s+for: .*\n/gm, ''));
      writeFileSync(join(dir, 'tests.yaml'), readFileSync(UNIT_TESTS, 'utf8').replace('../../manifests/alerts/kube-stream-proxy.rules.yaml', 'rules.yaml'));
      const r = runPromtool(['test', 'rules', join(dir, 'tests.yaml')]);
      expect(r.status, r.output).toBe(1);
      const failed = new Set([...r.output.matchAll(/alertname: (\w+), time:/g)].map((m) => m[1]));
      expect([...failed].sort()).toEqual(alerts.filter((a) => a.for !== undefined).map((a) => a.alert).sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every alert has unit tests in which it fires and in which it must not', () => {
    const units = (loadYaml(readFileSync(UNIT_TESTS, 'utf8')) as UnitTests).tests.flatMap((t) => t.alert_rule_test ?? []);
    const untested = alerts.flatMap((a) => {
      const cases = units.filter((u) => u.alertname === a.alert);
      const missing = [];
      if (!cases.some((c) => (c.exp_alerts ?? []).length > 0)) missing.push(`${a.alert}: no case where it fires`);
      if (!cases.some((c) => (c.exp_alerts ?? []).length === 0)) missing.push(`${a.alert}: no case where it must not fire`);
      return missing;
    });
    expect(untested).toEqual([]);
    // Nothing tests an alert that does not exist.
    expect(units.map((u) => u.alertname).filter((n) => !alerts.some((a) => a.alert === n))).toEqual([]);
  });
});

describe('alert rules (content)', () => {
  it('one alert per name, each with severity, summary, description and a runbook_url to its section of docs/operations.md', () => {
    const names = alerts.map((a) => a.alert);
    expect(new Set(names).size).toBe(names.length);
    const headings = new Set([...readFileSync(OPERATIONS, 'utf8').matchAll(/^#{2,4} (.+)$/gm)].map((m) => anchorOf(m[1]!)));
    for (const a of alerts) {
      expect(Object.keys(a.labels), a.alert).toEqual(['severity']);
      expect(['warning', 'critical'], a.alert).toContain(a.labels.severity);
      expect(Object.keys(a.annotations).sort(), a.alert).toEqual(['description', 'runbook_url', 'summary']);
      const url = new URL(a.annotations.runbook_url!);
      expect(url.pathname, a.alert).toMatch(/\/docs\/operations\.md$/);
      expect(url.hash, a.alert).toBe(`#${a.alert.toLowerCase()}`);
      expect(headings.has(url.hash.slice(1)), `docs/operations.md has no heading for ${url.hash}`).toBe(true);
    }
  });

  it('covers what issue 24 asks, each selector scoped to job="kube-stream-proxy"', () => {
    const metricsOf = (name: string): string[] => promqlReferences(alerts.find((a) => a.alert === name)!.expr).selectors.map((s) => s.metric);
    expect(metricsOf('KubeStreamProxyTranslationFailures')).toContain('apiserver_stream_translator_requests_total');
    expect(metricsOf('KubeStreamProxyTunnelFailures')).toContain('apiserver_stream_tunnel_requests_total');
    expect(metricsOf('KubeStreamProxyUpgradeRefusals')).toContain('kube_stream_proxy_upgrade_requests_total');
    expect(metricsOf('KubeStreamProxyStreamingFallbacksRising')).toContain('kube_stream_proxy_upstream_streaming_fallbacks_total');
    expect(metricsOf('KubeStreamProxyUpstreamUnreachable')).toContain('kube_stream_proxy_upstream_dial_errors_total');
    expect(metricsOf('KubeStreamProxyAggregatedAPIDown')).toContain('aggregator_unavailable_apiservice');
    expect(metricsOf('KubeStreamProxyAgentClusterWithoutTunnel')).toContain('kube_stream_proxy_tunnel_agents');
    expect(metricsOf('KubeStreamProxySessionsCutByShutdown')).toContain('kube_stream_proxy_streaming_requests_total');
    expect(metricsOf('KubeStreamProxyDown')).toContain('up');
    expect(metricsOf('KubeStreamProxyAbsent')).toContain('up');
    // kube-apiservers export apiserver_* and aggregator_* under the same names: scope every selector.
    for (const a of alerts) {
      for (const s of promqlReferences(a.expr).selectors) {
        expect(s.matchers, `${a.alert}: ${s.text}`).toContainEqual({ label: 'job', op: '=', value: 'kube-stream-proxy' });
      }
    }
  });
});

describe.skipIf(kubectlE2eSkipReason() !== undefined)('the PrometheusRule holds the same groups', () => {
  it('manifests/prometheusrule.yaml is the rendering of the rules file', () => {
    const r = spawnSync(process.execPath, [RENDER_SCRIPT, '--check'], { encoding: 'utf8', cwd: ROOT });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('kubectl kustomize manifests renders a PrometheusRule whose spec is the rules file, and promtool accepts that spec', () => {
    const yaml = execFileSync(findKubectl('1.33'), ['kustomize', join(ROOT, 'manifests')], { encoding: 'utf8' });
    const rules = (loadAllYaml(yaml) as { kind: string; metadata: { namespace?: string }; spec: Groups }[]).filter((o) => o?.kind === 'PrometheusRule');
    expect(rules).toHaveLength(1);
    expect(rules[0]!.metadata.namespace).toBe('kube-stream-proxy');
    expect(rules[0]!.spec).toEqual(plain);
    const dir = mkdtempSync(join(tmpdir(), 'ksp-prometheusrule-'));
    try {
      writeFileSync(join(dir, 'spec.json'), JSON.stringify(rules[0]!.spec));
      const r = runPromtool(['check', 'rules', join(dir, 'spec.json')]);
      expect(r, r.output).toMatchObject({ status: 0 });
      expect(r.output).toContain(`SUCCESS: ${alerts.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
