/**
 * `serve`'s recording flags: each misuse is a ConfigError naming the flag, and an invalid policy file
 * makes the built CLI exit 2 naming the file and the field, before anything listens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_MAX_RECORDED_BYTES, parseRecordingFlags } from '../../../src/recording/recording-flags.js';

const CLI = join(resolve(import.meta.dirname, '../../..'), 'bin/kube-stream-proxy.js');
let work: string;
let good: string;
let bad: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'ksp-rec-flags-'));
  good = join(work, 'good.yaml');
  bad = join(work, 'bad.yaml');
  writeFileSync(good, 'apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- record: output\n');
  writeFileSync(bad, 'apiVersion: kube-stream-proxy.io/v1alpha1\nkind: SessionRecordingConfiguration\nrules:\n- record: output\n  enforce: maybe\n');
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('parseRecordingFlags', () => {
  it('nothing given: not recording', async () => {
    expect(await parseRecordingFlags({})).toBeUndefined();
  });

  it('a policy and a directory: the defaults', async () => {
    const s = await parseRecordingFlags({ sessionRecordingConfig: good, sessionRecordingDir: join(work, 'rec') });
    expect(s).toMatchObject({ configPath: good, sink: { kind: 'directory', dir: join(work, 'rec') }, maxOutputBytes: DEFAULT_MAX_RECORDED_BYTES });
    expect(s!.policy.rules).toHaveLength(1);
  });

  it.each<[string, Record<string, string>, RegExp]>([
    ['a sink without a policy', { sessionRecordingDir: 'd' }, /need --session-recording-config/],
    ['a policy without a sink', { sessionRecordingConfig: 'x' }, /needs a sink: --session-recording-dir or --session-recorder-url/],
    ['two sinks', { sessionRecordingConfig: 'x', sessionRecordingDir: 'd', sessionRecorderUrl: 'https://r' }, /give one sink/],
    ['recorder files without the URL', { sessionRecordingConfig: 'x', sessionRecordingDir: 'd', sessionRecorderTokenFile: 't' }, /need --session-recorder-url/],
    ['a bad URL', { sessionRecordingConfig: 'x', sessionRecorderUrl: 'ftp://r' }, /--session-recorder-url: must be http or https/],
    ['credentials in the URL', { sessionRecordingConfig: 'x', sessionRecorderUrl: 'https://u:p@r' }, /must not contain credentials/],
    ['a bad byte limit', { sessionRecordingConfig: 'x', sessionRecordingDir: 'd', sessionRecordingMaxBytes: '1e6' }, /--session-recording-max-bytes: want a non-negative integer/],
    ['a missing token file', { sessionRecordingConfig: 'x', sessionRecorderUrl: 'https://r', sessionRecorderTokenFile: '/nonexistent/t' }, /--session-recorder-token-file: \/nonexistent\/t does not exist/],
  ])('%s', async (_name, flags, message) => {
    await expect(parseRecordingFlags(flags)).rejects.toThrow(message);
  });
});

describe('kube-stream-proxy serve (built)', () => {
  it('an invalid --session-recording-config: exit 2, the file and the field named', () => {
    const r = spawnSync(process.execPath, [CLI, 'serve', '--upstream', 'http://127.0.0.1:1', '--session-recording-config', bad, '--session-recording-dir', join(work, 'rec')], { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH, KSP_HEAP_FLOOR_MB: '0' } });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`kube-stream-proxy serve: --session-recording-config ${bad}: invalid SessionRecordingConfiguration:\n  rules[0].enforce: Invalid value: "maybe": must be true or false\n`);
  });
});
