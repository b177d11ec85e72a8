/**
 * The native output encoder (native/cast-escape.c) against the JavaScript path it replaces
 * (StringDecoder + JSON.stringify): for valid UTF-8 split anywhere, tty or not, stdout, stderr and
 * stdin, the cast lines are byte for byte the same; for arbitrary bytes, every line is valid JSON
 * and the recorded text is what a streaming WHATWG TextDecoder makes of the bytes (U+FFFD per
 * maximal invalid subpart). Skipped where the addon is not built (no compiler at install).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AsciicastWriter, STDERR_END, STDERR_START, type CastIdentity } from '../../../src/recording/asciicast.js';
import { loadNativeCastEscape } from '../../../src/recording/native-cast-escape.js';

const native = loadNativeCastEscape();
const ID: CastIdentity = { sessionId: '01890000-0000-7000-8000-000000000000', namespace: 'default', pod: 'demo', subresource: 'exec', command: ['sh'], tty: false, record: 'full' };
type Stream = 'stdout' | 'stderr' | 'stdin';

function cast(useNative: boolean, tty: boolean, chunks: Array<[Stream, Buffer]>): string {
  const lines: Buffer[] = [];
  const w = new AsciicastWriter({ ...ID, tty }, (l) => lines.push(typeof l === 'string' ? Buffer.from(l, 'utf8') : l), { startedAtMs: 0, nativeEscape: useNative ? native! : null });
  if (tty) w.resize(80, 24, 0);
  for (const [s, b] of chunks) {
    if (s === 'stdin') w.input(b, 0.5);
    else w.output(s, b, 0.5);
  }
  w.end({ exitCode: 0 }, 1);
  // Compare bytes: the lines as UTF-8 bytes either way.
  return Buffer.concat(lines).toString('utf8');
}

/** Split `b` at the given fractions. */
function splits(b: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => Math.floor(c * b.length)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const a of at) {
    out.push(b.subarray(from, a));
    from = a;
  }
  out.push(b.subarray(from));
  return out;
}

const text = fc.string({ unit: fc.oneof(fc.constantFrom('"', '\\', '\n', '\r', '\t', '\u001b', '\u0000', '\u007f', 'é', '€', '𝄞', '\u2028'), fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })), maxLength: 200 });
const stream = fc.constantFrom<Stream>('stdout', 'stderr', 'stdin');
const cuts = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 });

describe.skipIf(native === undefined)('native cast encoder', () => {
  it('valid UTF-8 split anywhere: the same cast lines as StringDecoder + JSON.stringify', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(stream, text, cuts), { maxLength: 6 }), fc.boolean(), (parts, tty) => {
        const chunks: Array<[Stream, Buffer]> = parts.flatMap(([s, t, c]) => splits(Buffer.from(t, 'utf8'), c).map((b) => [s, b] as [Stream, Buffer]));
        expect(cast(true, tty, chunks)).toBe(cast(false, tty, chunks));
      }),
      { numRuns: 500 },
    );
  });

  it('any bytes: valid JSON lines; the text is the streaming WHATWG decoding', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), cuts, (bytes, c) => {
        const chunks = splits(Buffer.from(bytes), c);
        let out = '';
        const w = new AsciicastWriter({ ...ID, tty: true }, (l) => (out += typeof l === 'string' ? l : l.toString('utf8')), { startedAtMs: 0, nativeEscape: native! });
        w.resize(80, 24, 0);
        for (const b of chunks) w.output('stdout', b, 0.5);
        w.end({ exitCode: 0 }, 1);
        const events = out.trim().split('\n').slice(1).map((l) => JSON.parse(l) as [number, string, string]);
        const got = events.filter((e) => e[1] === 'o').map((e) => e[2]).join('');
        const d = new TextDecoder('utf-8');
        const want = chunks.map((b) => d.decode(b, { stream: true })).join('') + d.decode();
        expect(got).toBe(want);
      }),
      { numRuns: 1000 },
    );
  });

  it('escapes as JSON.stringify, LF as CR LF and stderr in red without a tty', () => {
    const [line, used] = native!.escape(Buffer.from('a"b\\c\n\r\t\b\f\u0001\u001b\u007fé'), 1, '[0.000000, "o", "', '"]\n');
    expect(used).toBe(15);
    expect(line!.toString()).toBe(`[0.000000, "o", "a\\"b\\\\c\\r\\n\\r\\t\\b\\f\\u0001\\u001b\u007fé"]\n`);
    let out = '';
    const w = new AsciicastWriter({ ...ID }, (l) => (out += String(l)), { startedAtMs: 0, nativeEscape: native! });
    w.output('stderr', Buffer.from('err\n'), 0.1);
    w.end(undefined, 0.2);
    expect(JSON.parse(out.split('\n')[1]!)).toEqual([0.1, 'o', `${STDERR_START}err\r\n${STDERR_END}`]);
    // A character split across chunks waits for its end; one left at the end is U+FFFD.
    const euro = Buffer.from('€');
    expect(native!.escape(euro.subarray(0, 2), 0, 'h', 't')).toEqual([null, 0]);
    expect(native!.escape(euro.subarray(0, 2), 2, 'h', 't')[0]!.toString()).toBe('h\ufffdt');
  });
});
