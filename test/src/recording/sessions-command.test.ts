/**
 * `kube-stream-proxy sessions` prints no terminal controls that came from a recording (issue 31,
 * finding 8; CVE-2021-25743 is the same class in kubectl): a recording whose user, container and
 * command hold ESC, a CSI sequence, BEL, the C1 CSI (U+009B) and a CR is listed by the real CLI
 * (`node bin/kube-stream-proxy.js sessions list`, built) with each control escaped as visible text;
 * the bytes on stdout and stderr are checked, for the table, `-o json`, `verify` and an error message.
 *
 * Needs `npm run build`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Registry } from 'prom-client';
import { DirectorySink } from '../../../src/recording/directory-sink.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { escapeTerminal } from '../../../src/recording/terminal-escape.js';

const CLI = join(resolve(import.meta.dirname, '../../..'), 'bin/kube-stream-proxy.js');

/** The hostile values: ESC, a CSI sequence (clear screen), BEL, OSC (set title), C1 CSI, CR, DEL. */
const USER = 'eve\u001b[2J\u0007';
const CONTAINER = 'main\r\u009b31m';
const COMMAND = ['sh', '-c', 'echo \u001b]0;pwned\u0007\u007f'];

/** Run the built CLI; stdout and stderr as bytes. */
function cli(args: string[]): Promise<{ code: number; stdout: Buffer; stderr: Buffer }> {
  return new Promise((done) => {
    execFile(process.execPath, [CLI, 'sessions', ...args], { encoding: 'buffer' }, (err, stdout, stderr) => {
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Every terminal control in `bytes` (as UTF-8): C0 except LF, DEL, and C1 (U+0080–U+009F, bytes C2 80–9F). */
function controlsIn(bytes: Buffer): string[] {
  const found: string[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if ((b < 0x20 && b !== 0x0a) || b === 0x7f) found.push(`0x${b.toString(16)} at ${i}`);
    if (b === 0xc2 && bytes[i + 1]! >= 0x80 && bytes[i + 1]! <= 0x9f) found.push(`U+00${bytes[i + 1]!.toString(16)} at ${i}`);
  }
  return found;
}

describe('escapeTerminal', () => {
  it.each<[string, string, string]>([
    ['ESC and a CSI sequence', '\u001b[2J', '\\x1b[2J'],
    ['BEL', 'a\u0007b', 'a\\x07b'],
    ['CR, LF, TAB', 'a\rb\nc\td', 'a\\rb\\nc\\td'],
    ['NUL and DEL', '\u0000\u007f', '\\x00\\x7f'],
    ['C1 CSI and NEL', '\u009b31m\u0085', '\\u009b31m\\u0085'],
    ['bidirectional override and isolate', 'ab\u202ecd\u2066', 'ab\\u202ecd\\u2066'],
    ['printable Unicode is kept', 'José 日本 ✓ \u00a0', 'José 日本 ✓ \u00a0'],
  ])('%s', (_name, input, escaped) => {
    expect(escapeTerminal(input)).toBe(escaped);
  });
});

describe('sessions prints recorded values without terminal controls', () => {
  let work: string;
  let dir: string;
  let id: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-sessions-escape-'));
    dir = join(work, 'recordings');
    const sink = new DirectorySink(dir);
    id = newRecordingId();
    const rec = new SessionRecording({
      identity: { sessionId: id, user: USER, namespace: 'default', pod: 'demo', container: CONTAINER, subresource: 'exec', command: COMMAND, tty: false, record: 'output' },
      enforce: false,
      upload: await sink.open(id),
      sink: 'directory',
      metrics: createRecordingMetrics(new Registry()),
      log: { warn: () => undefined },
      maxOutputBytes: 0,
    });
    rec.output('stdout', Buffer.from('hello\n'));
    rec.exit({ exitCode: 0 });
    await rec.finish();
  });
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('sessions list: the table holds the values escaped, and no control byte', async () => {
    const r = await cli(['list', '--dir', dir]);
    expect(r.code, r.stderr.toString()).toBe(0);
    expect(controlsIn(r.stdout)).toEqual([]);
    const row = r.stdout.toString('utf8').split('\n')[1]!;
    expect(row).toContain(`${id}  eve\\x1b[2J\\x07`);
    expect(row).toContain('-/default/demo/main\\r\\u009b31m');
    expect(row).toContain('sh -c echo \\x1b]0;pwned\\x07\\x7f');
  });

  it('sessions list -o json: no raw control byte either, and the JSON still decodes to the stored values', async () => {
    const r = await cli(['list', '--dir', dir, '-o', 'json']);
    expect(r.code, r.stderr.toString()).toBe(0);
    expect(controlsIn(r.stdout)).toEqual([]);
    expect(JSON.parse(r.stdout.toString('utf8'))).toMatchObject({ id, user: USER, container: CONTAINER, command: COMMAND });
  });

  it('verify and error messages: a stored value echoed back is escaped', async () => {
    const bad = newRecordingId();
    writeFileSync(join(dir, `${bad}.json`), JSON.stringify({ id: bad, subresource: 'exec', namespace: 'default', pod: 'demo', record: 'output', enforce: false, start: new Date().toISOString(), durationSeconds: 1, exitCode: null, result: '\u001b[2J\u009b1m' }));
    const v = await cli(['verify', '--dir', dir]);
    expect(v.code).toBe(1);
    expect(controlsIn(v.stdout)).toEqual([]);
    expect(v.stdout.toString('utf8')).toContain(`FAILED  ${bad}  the index entry is invalid: result: Unsupported value: "\\u001b[2J\\u009b1m"`);
    const p = await cli(['play', 'x\u001b]0;pwned\u0007\u009b2J', '--dir', dir]);
    expect(p.code).toBe(1);
    expect(controlsIn(p.stderr)).toEqual([]);
    expect(p.stderr.toString('utf8')).toContain('"x\\u001b]0;pwned\\u0007\\u009b2J"');
  });
});
