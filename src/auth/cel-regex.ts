/**
 * The regular expressions of the JWT authenticator's CEL, on RE2 as kube-apiserver's are (Go's
 * `regexp`): CEL's `matches` and the Kubernetes regex library's `find` / `findAll`
 * (`k8s.io/apiserver/pkg/cel/library/regex.go`), run by `re2js`, a port of Go's `regexp` whose
 * matching time is linear in the input (docs/decisions.md). JavaScript's backtracking `RegExp` never
 * sees a pattern from the configuration or from a token: `^(a+)+$` over thirty `a`s and a `!` took
 * it seconds, on the one event loop every caller shares.
 * - RE2 syntax, RE2 semantics: `(?i)`, `\z`, `[[:alpha:]]`, `\pL` work; backreferences and
 *   lookaround do not compile.
 * - Literal patterns are compiled with the configuration, as kube-apiserver does: a bad `matches`
 *   literal fails compilation (`invalid matches argument`, cel-go's `ValidateRegexLiterals`), a bad
 *   `find` / `findAll` literal fails program instantiation (the library's `OptimizeRegex`).
 * - A pattern computed at run time that does not compile is an evaluation error with Go's text.
 * - Each call is charged before it runs, and not run when that goes over the budget: the larger of
 *   cel-go's `strCost * regexCost` (0.1 per character of the input times 0.25 per character of the
 *   pattern) and {@link RE2_STEP_COST} per step RE2 may take (input length × program size). cel-go
 *   guesses from the pattern's length; re2js is slower per step than Go, and a short pattern can be
 *   a large program (`.{1000}.{1000}`: 2,002 instructions, about 0.1 µs each per character here).
 * - Compiled patterns are cached, at most {@link REGEX_CACHE_MAX_ENTRIES}, oldest out first.
 */
import { RE2JS } from 're2js';
import { chargeCost, STRING_TRAVERSAL_COST_FACTOR } from './cel-cost.js';

/** cel-go's `RegexStringLengthCostFactor`: the cost of one character of a pattern. */
export const REGEX_STRING_LENGTH_COST_FACTOR = 0.25;

/**
 * The cost of one RE2 step (one input character against one program instruction): chosen so that
 * a budget of `PerCallLimit` (1,000,000) spent on regular expressions stays under about half a second
 * of re2js work, the bound the cost limit gives any other evaluation.
 */
export const RE2_STEP_COST = 0.3;

/** Most compiled patterns remembered (configuration literals, plus patterns computed from claims). */
export const REGEX_CACHE_MAX_ENTRIES = 256;

/** The functions taking a pattern (their first argument), and when kube-apiserver compiles a literal one. */
const PATTERN_FUNCTIONS: ReadonlyMap<string, 'compile' | 'program'> = new Map([
  ['matches', 'compile'],
  ['find', 'program'],
  ['findAll', 'program'],
]);

type Compiled = { re: RE2JS } | { error: string };

const cache = new Map<string, Compiled>();

/** `pattern` compiled by RE2, or Go's error text (`error parsing regexp: ...`). */
function compile(pattern: string): Compiled {
  let c = cache.get(pattern);
  if (c !== undefined) return c;
  try {
    c = { re: RE2JS.compile(pattern) };
  } catch (err) {
    c = { error: err instanceof Error ? err.message : String(err) };
  }
  if (cache.size >= REGEX_CACHE_MAX_ENTRIES) cache.delete(cache.keys().next().value!);
  cache.set(pattern, c);
  return c;
}

/** Go's compile error for `pattern`, or undefined when RE2 accepts it. */
export function regexSyntaxError(pattern: string): string | undefined {
  const c = compile(pattern);
  return 'error' in c ? c.error : undefined;
}

/** An error a regex function raises at run time (the engine reports its message). */
export class CelRegexError extends Error {
  override readonly name = 'CelRegexError';
  readonly code = 'KSP_ERR_CEL_REGEX' as const;
}

/** Compile for a call and charge it; `prefix` is what the function puts before Go's error text. */
function prepare(input: string, pattern: string, prefix: string): RE2JS {
  const c = compile(pattern);
  if ('error' in c) throw new CelRegexError(`${prefix}${c.error}`);
  const celGo = Math.ceil((1 + input.length) * STRING_TRAVERSAL_COST_FACTOR) * Math.ceil(pattern.length * REGEX_STRING_LENGTH_COST_FACTOR);
  const steps = Math.ceil((1 + input.length) * c.re.programSize() * RE2_STEP_COST);
  chargeCost(Math.max(celGo, steps));
  return c.re;
}

/** CEL's `string.matches(string)`: whether the pattern matches anywhere in `s` (Go's `MatchString`). */
export function regexMatches(s: string, pattern: string): boolean {
  return prepare(s, pattern, '').test(s);
}

/** The Kubernetes `string.find(string)`: the leftmost match, or `""` (Go's `FindString`). */
export function regexFind(s: string, pattern: string): string {
  return (prepare(s, pattern, 'Illegal regex: ').re2().find(s) as string | null) ?? '';
}

/** The Kubernetes `string.findAll(string[, int])`: up to `n` matches, all when `n < 0` (Go's `FindAllString`). */
export function regexFindAll(s: string, pattern: string, n = -1n): string[] {
  const re = prepare(s, pattern, 'Illegal regex: ');
  if (n === 0n) return [];
  return (re.re2().findAll(s, n < 0n ? -1 : Number(n)) as string[] | null) ?? [];
}

/** A literal pattern RE2 refuses, with where it is and how kube-apiserver reports it. */
export interface RegexLiteralError {
  /** Source offset of the literal. */
  offset: number;
  /** `compile`: cel-go's `invalid matches argument`; `program`: the library's program instantiation error. */
  stage: 'compile' | 'program';
  /** `invalid matches argument`, or Go's `error parsing regexp: ...`. */
  message: string;
}

interface Node {
  op: string;
  args: unknown;
  start?: number;
}

const isNode = (n: unknown): n is Node => n !== null && typeof n === 'object' && typeof (n as Node).op === 'string';

/**
 * The first literal pattern in a parsed expression that RE2 refuses among the functions checked at
 * `stage` (`matches` at compilation, `find`/`findAll` at program instantiation), looking through
 * macros (`all`, `exists`, `map`...), as cel-go's AST validators do.
 */
export function invalidRegexLiteral(ast: unknown, stage: 'compile' | 'program'): RegexLiteralError | undefined {
  const visit = (n: unknown): RegexLiteralError | undefined => {
    if (Array.isArray(n)) {
      for (const c of n) {
        const e = visit(c);
        if (e) return e;
      }
      return undefined;
    }
    if (!isNode(n)) return undefined;
    if (n.op === 'rcall' && Array.isArray(n.args)) {
      const [name, , args] = n.args as [unknown, unknown, unknown];
      const checked = typeof name === 'string' && PATTERN_FUNCTIONS.get(name) === stage;
      const literal = Array.isArray(args) ? (args[0] as unknown) : undefined;
      if (checked && isNode(literal) && literal.op === 'value' && typeof literal.args === 'string') {
        const error = regexSyntaxError(literal.args);
        if (error !== undefined) return { offset: literal.start ?? 0, stage, message: stage === 'compile' ? `invalid ${name as string} argument` : error };
      }
    }
    return visit(n.args);
  };
  return visit(ast);
}
