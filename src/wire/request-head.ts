/**
 * The one serializer of every request head the proxy writes on an upstream connection (the upgrade
 * paths' raw heads, the agent's rewritten head) and the one check of the header lines it hands to
 * `http.request` for plain requests, which Node then writes the same way.
 *
 * Header values are **byte strings**, as Node gives them (`rawHeaders`) and as Go holds them: one
 * character per byte, U+0000–U+00FF. A caller's own lines arrive that way; a value the proxy makes
 * from Unicode text (a user name, a group, an extra value) is turned into its UTF-8 bytes first with
 * {@link utf8HeaderValue}. The head is then encoded as latin1 — one byte per character — and checked
 * **after encoding**: the bytes must decode back to the very string (no character above U+00FF was
 * cut to its low byte: `č` U+010D is not CR), names must be tokens, values hold no byte below 0x20
 * but HTAB and no DEL (Go's `httpguts.ValidHeaderFieldValue`), the request-target no byte at or below
 * 0x20 and no DEL. Anything else throws {@link InvalidRequestHeadError} and nothing is written.
 */
import { InvalidRequestHeadError } from '../errors.js';
import type { HeaderPair } from './forwarded-headers.js';

/** RFC 9110 token: a method, a header name. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** A lone surrogate: a string with one has no UTF-8 form (a paired one is a code point, not matched in u mode). */
export const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * The UTF-8 bytes of `text` as a byte string: what a header line carries for a Unicode value. Throws
 * {@link InvalidRequestHeadError} for a string that has no UTF-8 form (a lone surrogate), which
 * `Buffer.from` would otherwise turn into U+FFFD, another value.
 */
export function utf8HeaderValue(text: string): string {
  // ASCII needs no conversion (the common case: every byte string of ASCII is its own UTF-8).
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(text)) return text;
  if (LONE_SURROGATE.test(text)) throw new InvalidRequestHeadError('a header value holds a lone surrogate (no UTF-8 form)');
  return Buffer.from(text, 'utf8').toString('latin1');
}

/** The text of a byte-string header value read as UTF-8 (a caller's `Impersonate-User`), or undefined when it is not UTF-8. */
export function headerValueText(value: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(value)) return value;
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.from(value, 'latin1'));
  } catch {
    return undefined;
  }
}

/** Why the bytes `b` (an encoded value) may not stand in a header line, or undefined. */
function valueFault(b: Buffer): string | undefined {
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return `byte 0x${c.toString(16).padStart(2, '0')} at ${i}`;
  }
  return undefined;
}

/** Encode `s` as latin1 and check nothing was lost (every character a byte). */
function latin1Exact(s: string, what: string): Buffer {
  const b = Buffer.from(s, 'latin1');
  if (b.toString('latin1') !== s) throw new InvalidRequestHeadError(`${what} holds a character above U+00FF (not a byte string)`);
  return b;
}

/** The checked bytes of one header line `name: value` (no line end). */
function headerLineBytes(name: string, value: string): Buffer {
  if (!TOKEN.test(name)) throw new InvalidRequestHeadError(`header name ${JSON.stringify(name.slice(0, 100))} is not a token`);
  const v = latin1Exact(value, `header ${name}`);
  const fault = valueFault(v);
  if (fault !== undefined) throw new InvalidRequestHeadError(`header ${name} holds a control character (${fault})`);
  return v;
}

/** Check the request-target: origin-form bytes, no space, control or DEL. */
function targetBytes(target: string): Buffer {
  const b = latin1Exact(target, 'the request-target');
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (c <= 0x20 || c === 0x7f) throw new InvalidRequestHeadError(`the request-target holds byte 0x${c.toString(16).padStart(2, '0')} at ${i}`);
  }
  return b;
}

const CRLF = Buffer.from('\r\n', 'latin1');
const COLON_SP = Buffer.from(': ', 'latin1');

/** The bytes of a request head: request line, header lines, blank line; each part checked after encoding. */
export function requestHeadBytes(method: string, target: string, pairs: readonly HeaderPair[], httpVersion = 'HTTP/1.1'): Buffer {
  if (!TOKEN.test(method)) throw new InvalidRequestHeadError(`method ${JSON.stringify(method.slice(0, 100))} is not a token`);
  if (httpVersion !== 'HTTP/1.1' && httpVersion !== 'HTTP/1.0') throw new InvalidRequestHeadError(`version ${JSON.stringify(httpVersion)}`);
  const parts: Buffer[] = [Buffer.from(`${method} `, 'latin1'), targetBytes(target), Buffer.from(` ${httpVersion}`, 'latin1'), CRLF];
  for (const [name, value] of pairs) parts.push(Buffer.from(name, 'latin1'), COLON_SP, headerLineBytes(name, value), CRLF);
  parts.push(CRLF);
  return Buffer.concat(parts);
}

/**
 * The header lines for `http.request` (Node's flat raw form), checked as {@link requestHeadBytes}
 * checks them: Node then writes each value as latin1, so the upstream receives exactly these bytes.
 */
export function requestHeaderLines(pairs: readonly HeaderPair[]): string[] {
  const out: string[] = [];
  for (const [name, value] of pairs) {
    headerLineBytes(name, value);
    out.push(name, value);
  }
  return out;
}

/** Check a request-target for `http.request` (Node itself refuses only characters outside U+0021–U+00FF). */
export function checkRequestTarget(target: string): string {
  targetBytes(target);
  return target;
}
