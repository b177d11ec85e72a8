#!/usr/bin/env node
/**
 * Writes manifests/prometheusrule.yaml, the Prometheus Operator's PrometheusRule, from the plain rules
 * file beside this script (the one source of truth): the rules file's text, indented, becomes `spec:`.
 * A text transform, so the groups are the same bytes in both files.
 *
 *   node manifests/alerts/render-prometheusrule.mjs          write it
 *   node manifests/alerts/render-prometheusrule.mjs --check  exit 1 if it is not up to date (the test)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const rulesFile = join(here, 'kube-stream-proxy.rules.yaml');
const target = join(here, '..', 'prometheusrule.yaml');

const HEADER = `# GENERATED from manifests/alerts/kube-stream-proxy.rules.yaml by
# \`node manifests/alerts/render-prometheusrule.mjs\`: edit that file, then run the script.
# The Prometheus Operator loads it when its Prometheus's ruleSelector (and ruleNamespaceSelector)
# match: add the label your Prometheus selects on (e.g. \`release: prometheus\`) in an overlay.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kube-stream-proxy
spec:
`;

/** The PrometheusRule text for the rules file's text. */
function render(rules) {
  const body = rules
    .split('\n')
    .map((line) => (line === '' ? '' : `  ${line}`))
    .join('\n');
  return HEADER + body;
}

const want = render(readFileSync(rulesFile, 'utf8'));
if (process.argv.includes('--check')) {
  let have = '';
  try {
    have = readFileSync(target, 'utf8');
  } catch {
    // missing: not up to date
  }
  if (have !== want) {
    process.stderr.write(`${relative(process.cwd(), target)} is not the rendering of ${relative(process.cwd(), rulesFile)}: run node manifests/alerts/render-prometheusrule.mjs\n`);
    process.exit(1);
  }
} else {
  writeFileSync(target, want);
}
