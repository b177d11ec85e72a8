/**
 * Recorded values shown to people without their terminal controls. A recording's user, pod,
 * container and command are caller-controlled text (a command is any argv, a pod name comes from
 * the request path); printed raw, an ESC, CSI or OSC sequence in them would act on the auditor's
 * terminal (clear the screen, rewrite earlier lines, set the title, on some terminals more).
 * kubectl had the same hole (CVE-2021-25743) and now escapes ESC and CR (kubectl's `term.EscapeTerminal`:
 * ESC as `^[`, CR as `\r`); here every control is escaped: C0 (U+0000–U+001F), DEL (U+007F) and C1
 * (U+0080–U+009F, which include the 8-bit CSI U+009B and OSC U+009D), and the bidirectional
 * overrides, isolates and marks (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which
 * reorder what a table shows ("Trojan Source", CVE-2021-42574).
 *
 * The escaped form is visible text: `\r`, `\n`, `\t`, `\xHH` for the rest of C0 and DEL, `\u00HH`
 * for C1, `\uHHHH` for the bidirectional controls. Everything else, any other Unicode included, is
 * printed as it is.
 */

/** C0, DEL, C1 and the bidirectional controls. */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\r': '\\r', '\n': '\\n', '\t': '\\t' };

function escapeOne(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
}

/** `text` with every C0, DEL, C1 and bidirectional control escaped as visible text (for tables, messages, logs). */
export function escapeTerminal(text: string): string {
  return text.replace(CONTROLS, escapeOne);
}

/**
 * JSON text (from `JSON.stringify`, which escapes C0 but leaves DEL, C1 and the bidirectional
 * controls raw) with those as `\uHHHH` escapes too: the same JSON value, nothing a terminal acts on.
 */
export function escapeJsonControls(json: string): string {
  return json.replace(/[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
