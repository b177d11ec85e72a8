/**
 * The CEL environments of the JWT authenticator, as kube-apiserver builds them
 * (`k8s.io/apiserver/pkg/authentication/cel/compile.go`): one with the variable `claims`
 * (`map(string, dyn)`: claim validation rules and every claim mapping) and one with `user`
 * (`kubernetes.UserInfo`: `username`, `uid`, `groups`, `extra`; user validation rules only), on the
 * engine `@marcbachmann/cel-js` (docs/decisions.md). Expressions are compiled (parsed and
 * type-checked) once, when the configuration is loaded; a validation rule must type-check to `bool`
 * ("must evaluate to bool"), mappings may have any type and are checked when they run.
 *
 * Beyond the engine's standard library (macros `has`, `all`, `exists`, `exists_one`, `map`, `filter`,
 * `cel.bind`; optional types `?.`/`orValue`; `lowerAscii`, `upperAscii`, `split`, `join`, `trim`,
 * `indexOf`, `substring`...) this adds what Kubernetes' base environment has and the
 * documentation's examples use: ext.Sets (`sets.contains`, `sets.equivalent`, `sets.intersects`),
 * ext.Strings' `replace`, `charAt`, `reverse`, and the Kubernetes regex library's `find`/`findAll`.
 * Regular expressions run on RE2, never on `RegExp`: the engine's own `matches` is replaced by
 * `cel-regex.ts`'s, and literal patterns are checked at compile time. Every evaluation runs under
 * kube-apiserver's per-call cost limit (`cel-cost.ts`). Not provided: Kubernetes' URL, IP, CIDR,
 * quantity, semver and format libraries (docs/security.md, "Deviations from kube-apiserver").
 */
import { Environment, type ASTNode } from '@marcbachmann/cel-js';
import { evaluateWithinBudget, meterEvaluator, type CelCostLimitError, type CelEvaluator } from './cel-cost.js';
import { invalidRegexLiteral, regexFind, regexFindAll, regexMatches } from './cel-regex.js';

/** The claims variable's name. */
export const CLAIMS_VAR = 'claims';
/** The user variable's name. */
export const USER_VAR = 'user';

/** An expression that compiled: run it with {@link CompiledExpression.evaluate}. */
export interface CompiledExpression {
  readonly expression: string;
  /** The checked type (`bool`, `string`, `list<string>`, `dyn`...). */
  readonly type: string;
  readonly ast: ASTNode;
  /**
   * Evaluate with the variable bound, under the per-call cost limit. Throws on a runtime error: the
   * engine's EvaluationError, a regex error, or {@link CelCostLimitError} over budget.
   */
  evaluate(value: unknown): unknown;
}

/**
 * Why an expression did not compile: `detail` is kube-apiserver's text (`compilation failed: ...`).
 * `internal` when kube-apiserver reports it as an internal error (`program instantiation failed: ...`).
 */
export interface CompileFailure {
  readonly detail: string;
  readonly internal?: true;
}

/** Namespace object behind `sets.*` (the engine's own `cel.bind` is built the same way). */
class CelSetsNamespace {}

/** CEL equality for the JSON-ish values claims hold (int and double compare by value). */
function celEquals(a: unknown, b: unknown): boolean {
  if ((typeof a === 'bigint' || typeof a === 'number') && (typeof b === 'bigint' || typeof b === 'number')) return Number(a) === Number(b);
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => celEquals(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && celEquals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
  }
  return false;
}

const containsAll = (list: unknown[], sub: unknown[]): boolean => sub.every((x) => list.some((y) => celEquals(x, y)));

/** The Kubernetes additions, registered on a fresh environment. */
function withKubernetesLibraries(env: Environment): Environment {
  return env
    .registerType('CelSetsNamespace', CelSetsNamespace)
    .registerConstant('sets', 'CelSetsNamespace', new CelSetsNamespace())
    .registerFunction('CelSetsNamespace.contains(list, list): bool', (_ns: unknown, a: unknown[], b: unknown[]) => containsAll(a, b))
    .registerFunction('CelSetsNamespace.equivalent(list, list): bool', (_ns: unknown, a: unknown[], b: unknown[]) => containsAll(a, b) && containsAll(b, a))
    .registerFunction('CelSetsNamespace.intersects(list, list): bool', (_ns: unknown, a: unknown[], b: unknown[]) => a.some((x) => b.some((y) => celEquals(x, y))))
    .registerFunction('string.replace(string, string): string', (s: string, from: string, to: string) => s.replaceAll(from, to))
    .registerFunction('string.replace(string, string, int): string', (s: string, from: string, to: string, n: bigint) => {
      if (n < 0n) return s.replaceAll(from, to);
      let out = s;
      let at = 0;
      for (let i = 0n; i < n; i++) {
        const j = out.indexOf(from, at);
        if (j < 0) break;
        out = out.slice(0, j) + to + out.slice(j + from.length);
        at = j + to.length;
      }
      return out;
    })
    .registerFunction('string.charAt(int): string', (s: string, i: bigint) => {
      const chars = [...s];
      if (i < 0n || i > BigInt(chars.length)) throw new Error(`index out of range: ${i}`);
      return chars[Number(i)] ?? '';
    })
    .registerFunction('string.reverse(): string', (s: string) => [...s].reverse().join(''))
    .registerFunction('string.find(string): string', (s: string, re: string) => regexFind(s, re))
    .registerFunction('string.findAll(string): list<string>', (s: string, re: string) => regexFindAll(s, re))
    .registerFunction('string.findAll(string, int): list<string>', (s: string, re: string, n: bigint) => regexFindAll(s, re, n));
}

/** The engine's declaration of a function, as its overload candidates hold it (frozen objects). */
interface FunctionDeclaration {
  readonly signature: string;
  readonly handler: (...args: never[]) => unknown;
}

/** What type-checking leaves on a call node: the environment's own candidate list for that call. */
interface CheckedCall {
  candidates?: { declarations: FunctionDeclaration[] };
}

const MATCHES_SIGNATURE = 'string.matches(string): bool';

/**
 * Put RE2 in place of the engine's `string.matches` (a `RegExp`) in `env`, and meter `env`'s
 * evaluator (`cel-cost.ts`). cel-js offers no way to replace a built-in overload, so this swaps the
 * declaration in `env`'s own candidate list, which type-checking a probe call exposes: an object
 * inheriting the built-in declaration, with RE2 as its handler. Only `env` sees it (registering the
 * Kubernetes functions gave it its own lists; the engine's other environments keep theirs). A second
 * probe must then reach the RE2 handler, which hands over the evaluator (the engine calls handlers
 * with it as `this`); anything else fails at module load, never silently leaving `RegExp` in place.
 */
function withRe2Matches(env: Environment): Environment {
  const probe = env.parse('"".matches("")');
  const checked = probe.check();
  const decls = (probe.ast as unknown as CheckedCall).candidates?.declarations;
  const i = decls?.findIndex((d) => d.signature === MATCHES_SIGNATURE) ?? -1;
  if (!checked.valid || !decls || i < 0) throw new Error(`cel-js: no ${MATCHES_SIGNATURE} overload to replace`);
  let evaluator: CelEvaluator | undefined;
  let capturing = true;
  const handler = function re2Matches(this: CelEvaluator, s: string, pattern: string): boolean {
    if (capturing) evaluator = this;
    return regexMatches(s, pattern);
  };
  decls[i] = Object.create(decls[i]!, { handler: { value: handler, enumerable: true } }) as FunctionDeclaration;
  const second = env.parse('"a".matches("(?i)A")');
  // `(?i)` is RE2 syntax that RegExp rejects: true proves the RE2 handler ran.
  const proved = second.check().valid && second({}) === true;
  capturing = false;
  if (!proved || !evaluator || typeof evaluator.run !== 'function') throw new Error(`cel-js: ${MATCHES_SIGNATURE} is not the RE2 one`);
  meterEvaluator(evaluator);
  return env;
}

let claimsEnv: Environment | undefined;
let userEnv: Environment | undefined;

/** The environment for claim validation rules and mappings (built once). */
function claimsEnvironment(): Environment {
  claimsEnv ??= withRe2Matches(withKubernetesLibraries(new Environment({ enableOptionalTypes: true })).registerVariable(CLAIMS_VAR, 'map'));
  return claimsEnv;
}

/** The environment for user validation rules (built once). */
function userEnvironment(): Environment {
  userEnv ??= withRe2Matches(
    withKubernetesLibraries(new Environment({ enableOptionalTypes: true })).registerVariable({
      name: USER_VAR,
      schema: { username: 'string', uid: 'string', groups: 'list<string>', extra: 'map<string, list<string>>' },
    }),
  );
  return userEnv;
}

/** `<input>:LINE:COL` of a source offset, as cel-go prints error locations. */
function location(expression: string, offset: number | undefined): string {
  if (offset === undefined) return '<input>';
  const before = expression.slice(0, offset);
  const line = before.split('\n').length;
  const col = offset - (before.lastIndexOf('\n') + 1) + 1;
  return `<input>:${line}:${col}`;
}

interface EngineError {
  summary?: string;
  message?: string;
  range?: { start: number };
}

function failureText(expression: string, err: EngineError): string {
  const summary = err.summary ?? String(err.message ?? err).split('\n')[0];
  return `compilation failed: ERROR: ${location(expression, err.range?.start)}: ${summary}`;
}

function compileIn(env: Environment, variable: string, expression: string, mustBeBool: boolean): CompiledExpression | CompileFailure {
  let parsed;
  try {
    parsed = env.parse(expression);
  } catch (err) {
    return { detail: failureText(expression, err as EngineError) };
  }
  const checked = parsed.check();
  if (!checked.valid) return { detail: failureText(expression, checked.error as EngineError) };
  // kube-apiserver's order: compilation (with the `matches` literal validator), the result type, then
  // program instantiation (where the regex library compiles `find`/`findAll` literals).
  const badMatches = invalidRegexLiteral(parsed.ast, 'compile');
  if (badMatches) return { detail: `compilation failed: ERROR: ${location(expression, badMatches.offset)}: ${badMatches.message}` };
  const type = checked.type ?? 'dyn';
  if (mustBeBool && type !== 'bool') return { detail: 'must evaluate to bool' };
  const badFind = invalidRegexLiteral(parsed.ast, 'program');
  if (badFind) return { detail: `program instantiation failed: ${badFind.message}`, internal: true };
  return { expression, type, ast: parsed.ast, evaluate: (value: unknown) => evaluateWithinBudget(() => parsed({ [variable]: value })) };
}

/** Compile an expression over `claims`; `mustBeBool` for validation rules. */
export function compileClaimsExpression(expression: string, mustBeBool: boolean): CompiledExpression | CompileFailure {
  return compileIn(claimsEnvironment(), CLAIMS_VAR, expression, mustBeBool);
}

/** Compile a user validation rule (over `user`, must be `bool`). */
export function compileUserExpression(expression: string): CompiledExpression | CompileFailure {
  return compileIn(userEnvironment(), USER_VAR, expression, true);
}

/** True when `r` is a compile failure. */
export function isCompileFailure(r: CompiledExpression | CompileFailure): r is CompileFailure {
  return 'detail' in r;
}

/**
 * Whether the expression selects `claims.NAME` (field or optional-field syntax, anywhere in it), as
 * kube-apiserver's `hasSelectExp` decides for the `email` / `email_verified` rule. Index syntax
 * (`claims["email"]`) does not count there either.
 */
export function selectsClaim(ast: ASTNode, name: string): boolean {
  const visit = (n: unknown): boolean => {
    if (Array.isArray(n)) return n.some(visit);
    if (!n || typeof n !== 'object' || !('op' in n)) return false;
    const node = n as { op: string; args: unknown };
    if ((node.op === '.' || node.op === '.?') && Array.isArray(node.args)) {
      const [operand, field] = node.args as [{ op?: string; args?: unknown }, unknown];
      if (operand?.op === 'id' && operand.args === CLAIMS_VAR && field === name) return true;
    }
    return visit(node.args);
  };
  return visit(ast);
}

/**
 * The claims as CEL values: JSON numbers that are integers become CEL `int` (kube-apiserver converts
 * claims to unstructured, whose whole numbers are int64), other numbers stay `double`.
 */
export function celClaims(value: unknown): unknown {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(celClaims);
  // fromEntries defines own properties, so a claim named `__proto__` stays a plain key.
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, celClaims(v)]));
  return value;
}
