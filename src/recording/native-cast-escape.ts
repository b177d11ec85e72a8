/**
 * The optional native encoder of recorded output (native/cast-escape.c, built beside the splice
 * addon as build/Release/ksp_cast.node by `npm ci`): bytes of a command's output straight to the
 * JSON string body of an asciicast event, UTF-8 validated (U+FFFD for invalid sequences) and
 * escaped as JSON.stringify escapes, without making a JavaScript string. Where it is not built (no
 * compiler at install) or `KSP_NATIVE_CAST=0`, the writer decodes with a StringDecoder and calls
 * JSON.stringify, with the same result for valid UTF-8.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/** Environment variable that turns the native encoder off (`0`), for comparisons and tests. */
export const NATIVE_CAST_ENV = 'KSP_NATIVE_CAST';

/** `escape` flags. */
export const CastEscapeFlags = { CRLF: 1, FINAL: 2 } as const;

/** The addon's one function. */
export interface NativeCastEscape {
  /**
   * `head` + the escaped characters of `input` + `tail` (null when no character was complete), and
   * how many input bytes were used (the rest: the start of a character split across chunks).
   */
  escape(input: Uint8Array, flags: number, head: string, tail: string): [Buffer | null, number];
}

let loaded: NativeCastEscape | undefined;
let tried = false;

/** Load the addon once; undefined when it is absent, cannot load, or is turned off. */
export function loadNativeCastEscape(): NativeCastEscape | undefined {
  if (tried) return loaded;
  tried = true;
  if (process.env[NATIVE_CAST_ENV] === '0') return undefined;
  try {
    const addon = createRequire(import.meta.url)(join(packageRoot(import.meta.url), 'build', 'Release', 'ksp_cast.node')) as Partial<NativeCastEscape>;
    if (typeof addon.escape === 'function') loaded = addon as NativeCastEscape;
  } catch {
    // not built: the JavaScript encoding is used
  }
  return loaded;
}
