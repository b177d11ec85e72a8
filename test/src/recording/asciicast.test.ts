/**
 * The asciicast v2 writer: header (held for a tty's first resize), events, stderr colouring, UTF-8
 * split across chunks, the byte limit, and the exit marker — asserted on the exact lines.
 */
import { describe, expect, it } from 'vitest';
import { AsciicastWriter, CAST_HEADER_KEY, castTitle, MAX_HELD_BYTES, STDERR_END, STDERR_START, type CastIdentity } from '../../../src/recording/asciicast.js';

const ID: CastIdentity = {
  sessionId: '01890000-0000-7000-8000-000000000000',
  user: 'alice',
  groups: ['sre', 'system:authenticated'],
  cluster: 'one',
  namespace: 'default',
  pod: 'demo',
  container: 'main',
  subresource: 'exec',
  command: ['sh', '-c', 'echo hi'],
  tty: false,
  record: 'output',
};

function record(identity: Partial<CastIdentity>, fn: (w: AsciicastWriter) => void, maxOutputBytes = 0): { header: Record<string, unknown>; events: unknown[][]; text: string } {
  let text = '';
  const w = new AsciicastWriter({ ...ID, ...identity }, (l) => (text += l), { startedAtMs: 1_700_000_000_500, maxOutputBytes });
  fn(w);
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.split('\n').slice(0, -1);
  for (const l of lines) expect(l.length).toBeGreaterThan(0); // never a blank line
  return { header: JSON.parse(lines[0]!), events: lines.slice(1).map((l) => JSON.parse(l)), text };
}

describe('AsciicastWriter', () => {
  it('non-tty: header at once (80x24), title, command, identity under one key', () => {
    const { header, events } = record({}, (w) => {
      w.output('stdout', Buffer.from('hi\n'), 0.25);
      w.end({ exitCode: 0 }, 0.5);
    });
    expect(header).toEqual({
      version: 2,
      width: 80,
      height: 24,
      timestamp: 1_700_000_000,
      title: 'default/demo/main: sh -c echo hi',
      command: 'sh -c echo hi',
      [CAST_HEADER_KEY]: { ...ID, groups: ['sre', 'system:authenticated'], command: ['sh', '-c', 'echo hi'] },
    });
    expect(events).toEqual([
      [0.25, 'o', 'hi\r\n'],
      [0.5, 'm', 'exit 0'],
    ]);
  });

  it('non-tty stderr is wrapped in SGR red and kept apart from stdout', () => {
    const { events } = record({}, (w) => {
      w.output('stdout', Buffer.from('out\n'), 0.1);
      w.output('stderr', Buffer.from('err\n'), 0.2);
      w.end({ exitCode: 3 }, 0.3);
    });
    expect(events).toEqual([
      [0.1, 'o', 'out\r\n'],
      [0.2, 'o', `${STDERR_START}err\r\n${STDERR_END}`],
      [0.3, 'm', 'exit 3'],
    ]);
  });

  it('tty: the header waits for the first resize, which sets its size; later ones are r COLSxROWS', () => {
    const { header, events } = record({ tty: true }, (w) => {
      w.output('stdout', Buffer.from('$ '), 0.1);
      w.resize(120, 40, 0.2);
      w.output('stdout', Buffer.from('ls\r\n'), 0.3);
      w.resize(100, 30, 0.4);
      w.end({ exitCode: 0 }, 0.5);
    });
    expect([header.width, header.height]).toEqual([120, 40]);
    expect(events).toEqual([
      [0.1, 'o', '$ '],
      [0.3, 'o', 'ls\r\n'],
      [0.4, 'r', '100x30'],
      [0.5, 'm', 'exit 0'],
    ]);
  });

  it('tty without any resize: 80x24, written at the end', () => {
    const { header, events } = record({ tty: true }, (w) => w.end({ exitCode: 0 }, 1));
    expect([header.width, header.height]).toEqual([80, 24]);
    expect(events).toEqual([[1, 'm', 'exit 0']]);
  });

  it('tty: held events past MAX_HELD_BYTES release the header at 80x24', () => {
    let lines = 0;
    const w = new AsciicastWriter({ ...ID, tty: true }, (l) => (lines += String(l).split('\n').length - 1), { startedAtMs: 0 });
    w.output('stdout', Buffer.alloc(MAX_HELD_BYTES + 10, 'x'), 0.1);
    expect(lines).toBe(2);
  });

  it('a UTF-8 character split across chunks (and streams interleaved) stays whole; invalid bytes become U+FFFD', () => {
    const euro = Buffer.from('€'); // e2 82 ac
    const { events, text } = record({}, (w) => {
      w.output('stdout', euro.subarray(0, 1), 0.1);
      w.output('stderr', Buffer.from('e'), 0.15);
      w.output('stdout', euro.subarray(1), 0.2);
      w.output('stdout', Buffer.from([0xff, 0x41]), 0.3);
      w.output('stdout', Buffer.from([0xe2, 0x82]), 0.35); // truncated at the end
      w.end({ exitCode: 0 }, 0.4);
    });
    expect(events).toEqual([
      [0.15, 'o', `${STDERR_START}e${STDERR_END}`],
      [0.2, 'o', '€'],
      [0.3, 'o', '\ufffdA'],
      [0.4, 'o', '\ufffd'],
      [0.4, 'm', 'exit 0'],
    ]);
    expect(text).not.toMatch(/[\ud800-\udfff]/);
  });

  it('control characters and quotes are JSON-escaped', () => {
    const { text, events } = record({ tty: true }, (w) => {
      w.resize(80, 24, 0);
      w.output('stdout', Buffer.from('\u001b[1m"\\\u0000'), 0.1);
      w.end(undefined, 0.2);
    });
    expect(text).toContain('"\\u001b[1m\\"\\\\\\u0000"');
    expect(events.at(-1)).toEqual([0.2, 'm', 'ended without an exit status']);
  });

  it('input is recorded only with record: full', () => {
    const out = record({ tty: true }, (w) => {
      w.resize(80, 24, 0);
      w.input(Buffer.from('secret\r'), 0.1);
      w.end({ exitCode: 0 }, 0.2);
    });
    expect(out.text).not.toContain('secret');
    const full = record({ tty: true, record: 'full' }, (w) => {
      w.resize(80, 24, 0);
      w.input(Buffer.from('ls\r'), 0.1);
      w.end({ exitCode: 0 }, 0.2);
    });
    expect(full.events[0]).toEqual([0.1, 'i', 'ls\r']);
  });

  it('max bytes: one marker, output no longer recorded, resizes and the exit still are', () => {
    const { events } = record(
      { tty: true },
      (w) => {
        w.resize(80, 24, 0);
        w.output('stdout', Buffer.from('12345'), 0.1);
        w.output('stdout', Buffer.from('67890'), 0.2);
        w.output('stdout', Buffer.from('more'), 0.3);
        w.resize(90, 20, 0.4);
        w.end({ error: 'boom' }, 0.5);
      },
      8,
    );
    expect(events).toEqual([
      [0.1, 'o', '12345'],
      [0.2, 'm', 'recording limit reached: 8 bytes; output is no longer recorded'],
      [0.4, 'r', '90x20'],
      [0.5, 'm', 'error: boom'],
    ]);
  });

  it('times never go backwards', () => {
    const { events } = record({}, (w) => {
      w.output('stdout', Buffer.from('a'), 0.5);
      w.output('stdout', Buffer.from('b'), 0.4);
      w.end({ exitCode: 0 }, 0.1);
    });
    expect(events.map((e) => e[0])).toEqual([0.5, 0.5, 0.5]);
  });

  it.each([
    [{ namespace: 'ns', pod: 'p', subresource: 'exec', command: ['sh'] }, 'ns/p: sh'],
    [{ namespace: 'ns', pod: 'p', container: 'c', subresource: 'attach', command: [] }, 'ns/p/c: attach'],
    [{ namespace: 'ns', pod: 'p', subresource: 'exec', command: [] }, 'ns/p'],
  ] as const)('title %j → %s', (id, title) => {
    expect(castTitle(id)).toBe(title);
  });
});
