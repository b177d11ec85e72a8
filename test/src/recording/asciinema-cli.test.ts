/**
 * The files stay valid asciicast v2 for the reference reader: Debian's asciinema 2.2 (`asciinema
 * cat`, run under a pty with `script`, since it opens /dev/tty) reads casts this writer produced —
 * custom header key, tty and non-tty, stderr colouring, resize, markers, the byte limit, invalid
 * UTF-8 — and writes exactly their `o` text.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AsciicastWriter, type CastIdentity } from '../../../src/recording/asciicast.js';

const ASCIINEMA = '/usr/bin/asciinema';

function cast(identity: Partial<CastIdentity>, fn: (w: AsciicastWriter) => void, maxOutputBytes = 0): string {
  let text = '';
  const w = new AsciicastWriter(
    { sessionId: '01890000-0000-7000-8000-000000000000', namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'], tty: false, record: 'output', ...identity },
    (l) => (text += l),
    { startedAtMs: Date.now(), maxOutputBytes },
  );
  fn(w);
  return text;
}

function outputOf(text: string): string {
  return text
    .split('\n')
    .slice(1)
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as [number, string, string])
    .filter((e) => e[1] === 'o')
    .map((e) => e[2])
    .join('');
}

describe.skipIf(!existsSync(ASCIINEMA))('asciinema 2.2 reads the casts', () => {
  it.each<[string, string]>([
    ['non-tty with stderr', cast({}, (w) => {
      w.output('stdout', Buffer.from('out\n'), 0.1);
      w.output('stderr', Buffer.from('err\n'), 0.2);
      w.end({ exitCode: 1 }, 0.3);
    })],
    ['tty with resize, markers, invalid UTF-8', cast({ tty: true }, (w) => {
      w.resize(100, 30, 0);
      w.output('stdout', Buffer.from([0x68, 0x69, 0xff, 0x0d, 0x0a]), 0.1);
      w.resize(120, 40, 0.2);
      w.marker('a marker', 0.25);
      w.output('stdout', Buffer.from('€\r\n'), 0.3);
      w.end({ error: 'boom' }, 0.4);
    })],
    ['byte limit', cast({ tty: true }, (w) => {
      w.resize(80, 24, 0);
      w.output('stdout', Buffer.from('12345'), 0.1);
      w.output('stdout', Buffer.from('67890'), 0.2);
      w.end({ exitCode: 0 }, 0.3);
    }, 6)],
  ])('%s', (_name, text) => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-asciinema-'));
    try {
      const f = join(dir, 'rec.cast');
      writeFileSync(f, text);
      const out = execFileSync('script', ['-qec', `${ASCIINEMA} cat ${f}`, '/dev/null'], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir, TERM: 'xterm' } });
      // The pty turns each \n of the output into \r\n (ONLCR): undo that for the comparison.
      expect(out.replace(/\r\n/g, '\n')).toBe(outputOf(text).replace(/\r\n/g, '\n'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
