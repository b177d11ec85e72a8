/**
 * `npm run build && node dist/bench/cel-regex.js`: the catastrophic pattern of issue 31 (finding 7)
 * before and after. `claims.x.matches('^(a+)+$')` over N `a`s and a `!`, timed
 * - before: on the engine's own `matches`, JavaScript's backtracking `RegExp`, which the JWT
 *   authenticator ran until it moved to RE2 (cel-js's global environment still has it);
 * - after: on the JWT authenticator's environment (`compileClaimsExpression`: RE2, under the cost limit).
 * One run per row, wall-clock milliseconds on this machine; the "before" rows stop where the next one
 * would take minutes (each `a` doubles it). Output: a Markdown table (docs/decisions.md keeps one).
 */
import { performance } from 'node:perf_hooks';
import { evaluate as engineEvaluate } from '@marcbachmann/cel-js';
import { compileClaimsExpression, isCompileFailure } from '../src/auth/cel-environment.js';

const EXPRESSION = "x.matches('^(a+)+$')";
/** The longest input the backtracking engine is given (`CEL_REGEX_BEFORE_MAX`): its time doubles with each `a`. */
const BEFORE_MAX = Number(process.env.CEL_REGEX_BEFORE_MAX ?? 26);
const LENGTHS = [16, 20, 22, 24, 26, 28, 30, 64, 1_000, 12_000];

function time(f: () => unknown): { ms: number; value: unknown } {
  const start = performance.now();
  let value: unknown;
  try {
    value = f();
  } catch (err) {
    value = `error: ${(err as Error).message}`;
  }
  return { ms: performance.now() - start, value };
}

const after = compileClaimsExpression(`claims.${EXPRESSION}`, true);
if (isCompileFailure(after)) throw new Error(after.detail);

const rows = ['| claim (`a`×N + `!`) | before: RegExp (ms) | after: RE2 (ms) | result |', '|---:|---:|---:|---|'];
for (const n of LENGTHS) {
  const x = `${'a'.repeat(n)}!`;
  const before = n <= BEFORE_MAX ? time(() => engineEvaluate(EXPRESSION, { x })) : undefined;
  const now = time(() => after.evaluate({ x }));
  rows.push(`| ${n} | ${before ? before.ms.toFixed(1) : 'not run (doubles per `a`)'} | ${now.ms.toFixed(2)} | ${String(now.value)} |`);
}
console.log(`Node ${process.version}, ${EXPRESSION}\n`);
console.log(rows.join('\n'));
