/**
 * SessionRecordingConfiguration: strict decoding and validation with field paths; the file loader's
 * start-up error (what the CLI prints before exiting 2) and its reloads (a bad one keeps the last
 * good policy, logged and counted).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { ConfigError } from '../../../src/errors.js';
import { parseRecordingConfig, RecordingConfigInvalid } from '../../../src/recording/recording-config.js';
import { loadRecordingConfig, RecordingConfigFile } from '../../../src/recording/recording-config-file.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { counterValue } from '../../helpers/metrics.js';

const HEAD = { apiVersion: 'kube-stream-proxy.io/v1alpha1', kind: 'SessionRecordingConfiguration' };

function errorsOf(doc: unknown): string[] {
  try {
    parseRecordingConfig(doc);
  } catch (e) {
    if (e instanceof RecordingConfigInvalid) return e.errors.map((f) => `${f.field}: ${f.message}`);
    throw e;
  }
  return [];
}

describe('parseRecordingConfig', () => {
  it('accepts the documented example; rules keep their order; unnamed rules are named by position', () => {
    const p = parseRecordingConfig({
      ...HEAD,
      rules: [
        { name: 'prod', match: { namespaces: ['prod'], tty: true }, record: 'full', enforce: true },
        { record: 'output' },
      ],
    });
    expect(p.rules.map((r) => [r.name, r.record, r.enforce])).toEqual([
      ['prod', 'full', true],
      ['rules[1]', 'output', false],
    ]);
  });

  it('no rules: valid, records nothing', () => {
    expect(parseRecordingConfig(HEAD).rules).toEqual([]);
  });

  it.each<[string, unknown, string[]]>([
    ['missing apiVersion and kind', { rules: [] }, ['apiVersion: Required value', 'kind: Required value']],
    ['wrong apiVersion', { ...HEAD, apiVersion: 'v1' }, ['apiVersion: Unsupported value: "v1": supported values: "kube-stream-proxy.io/v1alpha1"']],
    ['wrong kind', { ...HEAD, kind: 'AuditPolicy' }, ['kind: Unsupported value: "AuditPolicy": supported values: "SessionRecordingConfiguration"']],
    ['unknown top-level field', { ...HEAD, rule: [] }, ['rule: unknown field "rule"']],
    ['unknown rule field', { ...HEAD, rules: [{ record: 'output', mtch: {} }] }, ['rules[0].mtch: unknown field "mtch"']],
    ['unknown match field', { ...HEAD, rules: [{ record: 'output', match: { user: ['a'] } }] }, ['rules[0].match.user: unknown field "user"']],
    ['record missing', { ...HEAD, rules: [{}] }, ['rules[0].record: Required value: one of "none", "output", "full"']],
    ['record unsupported', { ...HEAD, rules: [{ record: 'all' }] }, ['rules[0].record: Unsupported value: "all": supported values: "none", "output", "full"']],
    ['enforce not bool', { ...HEAD, rules: [{ record: 'full', enforce: 'yes' }] }, ['rules[0].enforce: Invalid value: "yes": must be true or false']],
    ['enforce with none', { ...HEAD, rules: [{ record: 'none', enforce: true }] }, ['rules[0].enforce: Invalid value: true: enforce needs record "output" or "full"']],
    ['subresource unsupported', { ...HEAD, rules: [{ record: 'output', match: { subresources: ['exec', 'log'] } }] }, ['rules[0].match.subresources[1]: Unsupported value: "log": supported values: "exec", "attach", "portforward"']],
    ['empty list', { ...HEAD, rules: [{ record: 'output', match: { users: [] } }] }, ['rules[0].match.users: Required value: must not be empty (leave the field out to match anything)']],
    ['not a list', { ...HEAD, rules: [{ record: 'output', match: { pods: 'demo' } }] }, ['rules[0].match.pods: Invalid value: "demo": must be a list of strings']],
    ['empty pattern', { ...HEAD, rules: [{ record: 'output', match: { pods: [''] } }] }, ['rules[0].match.pods[0]: Required value']],
    ['duplicate pattern', { ...HEAD, rules: [{ record: 'output', match: { pods: ['a', 'a'] } }] }, ['rules[0].match.pods[1]: Duplicate value: "a"']],
    ['tty not bool', { ...HEAD, rules: [{ record: 'output', match: { tty: 1 } }] }, ['rules[0].match.tty: Invalid value: 1: must be true or false']],
    ['duplicate names', { ...HEAD, rules: [{ name: 'a', record: 'output' }, { name: 'a', record: 'none' }] }, ['rules[1].name: Duplicate value: "a"']],
    ['rules not a list', { ...HEAD, rules: {} }, ['rules: Invalid value: {}: must be a list']],
    ['every error at once', { ...HEAD, rules: [{ record: 'x' }, { record: 'full', match: { tty: 'no' } }] }, [
      'rules[0].record: Unsupported value: "x": supported values: "none", "output", "full"',
      'rules[1].match.tty: Invalid value: "no": must be true or false',
    ]],
  ])('%s', (_name, doc, want) => {
    expect(errorsOf(doc)).toEqual(want);
  });
});

describe('loading --session-recording-config', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('an invalid file at start: ConfigError naming the file and the field', async () => {
    dir = mkdtempSync(join(tmpdir(), 'ksp-rec-config-'));
    const f = join(dir, 'recording.yaml');
    writeFileSync(f, 'apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- record: everything\n');
    const e = await loadRecordingConfig(f).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as Error).message).toBe(
      `--session-recording-config ${f}: invalid SessionRecordingConfiguration:\n  rules[0].record: Unsupported value: "everything": supported values: "none", "output", "full"`,
    );
    await expect(loadRecordingConfig(join(dir, 'missing.yaml'))).rejects.toThrow(`--session-recording-config ${join(dir, 'missing.yaml')}: cannot read the file (ENOENT)`);
    writeFileSync(f, 'rules: [\n');
    await expect(loadRecordingConfig(f)).rejects.toThrow(/not valid YAML/);
  });

  it('reloads on change; a bad reload keeps the last good policy, logged, counted, gauge 0', async () => {
    dir = mkdtempSync(join(tmpdir(), 'ksp-rec-config-'));
    const f = join(dir, 'recording.yaml');
    const good = (record: string) => `apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- name: all\n  record: ${record}\n`;
    writeFileSync(f, good('output'));
    const registry = new Registry();
    const metrics = createRecordingMetrics(registry);
    const logs: string[] = [];
    const cfg = await RecordingConfigFile.load(f, { metrics, logger: { info: (m) => logs.push(`info ${m}`), error: (m) => logs.push(`error ${m}`) }, watch: false, pollIntervalMs: 0 });
    try {
      expect(cfg.policy.rules[0]!.record).toBe('output');
      // A ConfigMap-style swap: write elsewhere, rename into place.
      writeFileSync(join(dir, 'next'), good('full'));
      renameSync(join(dir, 'next'), f);
      await cfg.reload();
      expect(cfg.policy.rules[0]!.record).toBe('full');
      writeFileSync(f, good('bogus'));
      await cfg.reload();
      expect(cfg.policy.rules[0]!.record).toBe('full');
      expect(logs.at(-1)).toMatch(/^error --session-recording-config .*rules\[0\]\.record: Unsupported value: "bogus".*\n\(reload rejected; keeping the previous 1 rules\)$/s);
      const text = await registry.metrics();
      expect(counterValue(text, 'kube_stream_proxy_session_recording_config_reloads_total', { result: 'success' })).toBe(2);
      expect(counterValue(text, 'kube_stream_proxy_session_recording_config_reloads_total', { result: 'failure' })).toBe(1);
      expect(counterValue(text, 'kube_stream_proxy_session_recording_config_last_reload_successful')).toBe(0);
    } finally {
      cfg.close();
    }
  });

  it('the watcher picks a change up without an explicit reload', async () => {
    dir = mkdtempSync(join(tmpdir(), 'ksp-rec-config-'));
    const f = join(dir, 'recording.yaml');
    writeFileSync(f, `apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\n`);
    const cfg = await RecordingConfigFile.load(f, { debounceMs: 10, pollIntervalMs: 50 });
    try {
      writeFileSync(f, `apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- record: output\n`);
      const deadline = Date.now() + 5000;
      while (cfg.policy.rules.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(cfg.policy.rules).toHaveLength(1);
    } finally {
      cfg.close();
    }
  });
});
