/**
 * Regular expressions in the JWT authenticator's CEL (src/auth/cel-regex.ts, src/auth/cel-cost.ts)
 * run on RE2, as kube-apiserver's do: RE2 syntax and Go's match semantics for `matches`, `find` and
 * `findAll`; literal patterns RE2 refuses (backreferences, lookaround) stop the configuration from
 * loading with the field path and text kube-apiserver gives; a pattern computed at run time fails
 * the evaluation with Go's text; and every evaluation runs under kube-apiserver's per-call cost limit.
 * The catastrophic pattern's timing, before and after, is measured by scripts/measure-cel-regex.ts
 * (docs/decisions.md), not here: these tests assert on values, messages and counters.
 */
import { Environment, evaluate as celJsEvaluate } from '@marcbachmann/cel-js';
import { describe, expect, it } from 'vitest';
import { decodeAuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration, type CompiledJwtAuthenticator } from '../../../src/auth/authentication-config-validation.js';
import { compileClaimsExpression, isCompileFailure } from '../../../src/auth/cel-environment.js';
import { userFromClaims, type Claims } from '../../../src/auth/jwt-claims.js';
import { JwtAuthenticationError, type JwtFailureReason } from '../../../src/auth/jwt-error.js';

/** The errors of a configuration whose `jwt[0]` body is given as JSON (issuer filled in). */
function errorsOf(body: object): string[] {
  const j = JSON.stringify({ issuer: { url: 'https://example.com', audiences: ['a'] }, claimMappings: { username: { claim: 'sub', prefix: '' } }, ...body });
  return validateAuthenticationConfiguration(decodeAuthenticationConfiguration(`apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: [${j}]\n`)).errors.map(String);
}

function entry(body: object): CompiledJwtAuthenticator {
  const j = JSON.stringify({ issuer: { url: 'https://example.com', audiences: ['a'] }, ...body });
  const { errors, authenticators } = validateAuthenticationConfiguration(decodeAuthenticationConfiguration(`apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: [${j}]\n`));
  expect(errors.map(String)).toEqual([]);
  return authenticators[0]!;
}

/** Evaluate a claims expression (compiled as a mapping: any type). */
function run(expression: string, claims: Claims = {}): unknown {
  const c = compileClaimsExpression(expression, false);
  if (isCompileFailure(c)) throw new Error(c.detail);
  return c.evaluate(claims);
}

/** The error a claims expression fails with at run time. */
function runtimeError(expression: string, claims: Claims = {}): string {
  try {
    run(expression, claims);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('no error');
}

function refusal(a: CompiledJwtAuthenticator, claims: Claims): { reason: JwtFailureReason; message: string } {
  try {
    userFromClaims(a, claims);
  } catch (err) {
    expect(err).toBeInstanceOf(JwtAuthenticationError);
    return { reason: (err as JwtAuthenticationError).reason, message: (err as JwtAuthenticationError).message };
  }
  throw new Error('not refused');
}

describe('literal patterns RE2 refuses stop the configuration at load, as kube-apiserver reports them', () => {
  it.each<[string, object, string]>([
    [
      'a backreference in a claim validation rule',
      { claimValidationRules: [{ expression: "claims.x.matches('(a)\\\\1')" }] },
      `jwt[0].claimValidationRules[0].expression: Invalid value: "claims.x.matches('(a)\\\\\\\\1')": compilation failed: ERROR: <input>:1:18: invalid matches argument`,
    ],
    [
      'a lookahead in a macro body',
      { claimValidationRules: [{ expression: "claims.groups.all(g, g.matches('^(?=adm)'))" }] },
      `jwt[0].claimValidationRules[0].expression: Invalid value: "claims.groups.all(g, g.matches('^(?=adm)'))": compilation failed: ERROR: <input>:1:32: invalid matches argument`,
    ],
    [
      'a lookbehind in a user validation rule',
      { userValidationRules: [{ expression: "user.username.matches('(?<=x)y')" }] },
      `jwt[0].userValidationRules[0].expression: Invalid value: "user.username.matches('(?<=x)y')": compilation failed: ERROR: <input>:1:23: invalid matches argument`,
    ],
    [
      'a backreference in find (the regex library compiles its literals at program instantiation)',
      { claimMappings: { username: { expression: "claims.sub.find('(a)\\\\1')" } } },
      'jwt[0].claimMappings.username.expression: Internal error: program instantiation failed: error parsing regexp: invalid escape sequence: `\\1`',
    ],
    [
      'a lookahead in findAll',
      { claimMappings: { username: { claim: 'sub', prefix: '' }, extra: [{ key: 'example.com/x', valueExpression: "claims.sub.findAll('a(?!b)', 2)" }] } },
      'jwt[0].claimMappings.extra[0].valueExpression: Internal error: program instantiation failed: error parsing regexp: invalid or unsupported Perl syntax: `(?!`',
    ],
  ])('%s', (_name, body, error) => {
    expect(errorsOf(body)).toEqual([error]);
  });

  it('RE2 syntax that RegExp lacks compiles: (?i), \\z, [[:alpha:]], \\pL, (?P<name>...)', () => {
    expect(errorsOf({ claimValidationRules: [{ expression: "claims.sub.matches('(?i)^[[:alpha:]]+\\\\pL(?P<n>x)\\\\z')" }] })).toEqual([]);
    expect(run("'aBx'.matches('(?i)^[[:alpha:]]+\\\\pL(?P<n>x)\\\\z')")).toBe(true);
  });
});

describe("Go's match semantics", () => {
  it.each<[string, unknown]>([
    // matches is unanchored (MatchString), ^ and $ are the text's ends, . is one code point and not \n
    ["'xabcx'.matches('abc')", true],
    ["'abc\\ndef'.matches('^def$')", false],
    ["'😀'.matches('^.$')", true],
    ["'a\\nb'.matches('a.b')", false],
    ["'a\\nb'.matches('(?s)a.b')", true],
    // find: the leftmost match, "" when none; Kubernetes' documented examples
    ["'abc 123'.find('[0-9]+')", '123'],
    ["'abc'.find('[0-9]+')", ''],
    ["'123 abc 456'.findAll('[0-9]+')", ['123', '456']],
    ["'123 abc 456'.findAll('[0-9]+', 1)", ['123']],
    ["'123 abc 456'.findAll('[0-9]+', 0)", []],
    ["'abc'.findAll('[0-9]+')", []],
    // FindAllString drops an empty match right after a match
    ["'baaab'.findAll('a*')", ['', 'aaa', '']],
    // leftmost-first, as Go (not leftmost-longest)
    ["'abcd'.find('a|ab|abc')", 'a'],
  ])('%s → %j', (expression, want) => {
    expect(run(expression)).toEqual(want);
  });

  it("the catastrophic pattern over a token's worth of input is answered (RE2 is linear)", () => {
    const x = `${'a'.repeat(8000)}!`;
    expect(run("claims.x.matches('^(a+)+$')", { x })).toBe(false);
    expect(run("claims.x.find('(a|aa)*b')", { x })).toBe('');
  });

  it("a pattern computed at run time that RE2 refuses is an evaluation error with Go's text", () => {
    expect(runtimeError('claims.x.matches(claims.p)', { x: 'aa', p: '(a)\\1' })).toBe('error parsing regexp: invalid escape sequence: `\\1`');
    expect(runtimeError('claims.x.find(claims.p)', { x: 'ab', p: 'a(?=b)' })).toBe('Illegal regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`');
    expect(runtimeError('claims.x.findAll(claims.p)', { x: 'ab', p: '[' })).toBe('Illegal regex: error parsing regexp: missing closing ]: `[`');
    // Through the mapping: the token is refused with kube-apiserver's message.
    const a = entry({ claimMappings: { username: { claim: 'sub', prefix: '' } }, claimValidationRules: [{ expression: 'claims.x.matches(claims.p)', message: 'x' }] });
    expect(refusal(a, { sub: 'alice', x: 'aa', p: '(a)\\1' })).toEqual({
      reason: 'expression_error',
      message: "oidc: error evaluating claim validation expression: expression 'claims.x.matches(claims.p)' resulted in error: error parsing regexp: invalid escape sequence: `\\1`",
    });
  });

  it("the engine's own environments keep their matches: the RE2 one is this authenticator's only", () => {
    // RegExp accepts lookahead; RE2 does not. cel-js's global and fresh environments are untouched.
    expect(celJsEvaluate("'ab'.matches('a(?=b)')")).toBe(true);
    expect(new Environment().evaluate("'ab'.matches('a(?=b)')")).toBe(true);
    expect(runtimeError("claims.x.matches('a' + '(?=b)')", { x: 'ab' })).toBe('error parsing regexp: invalid or unsupported Perl syntax: `(?=`');
  });
});

describe("kube-apiserver's per-call cost limit", () => {
  const list = (n: number): bigint[] => Array.from({ length: n }, (_, i) => BigInt(i));
  const triple = 'claims.l.all(x, claims.l.all(y, claims.l.all(z, x + y + z >= 0)))';

  it("an evaluation within PerCallLimit (1,000,000) runs; one over it fails with cel-go's error", () => {
    expect(run(triple, { l: list(10) })).toBe(true);
    expect(runtimeError(triple, { l: list(200) })).toBe('operation cancelled: actual cost limit exceeded');
  });

  it('the limit is per evaluation: a failed evaluation leaves nothing behind for the next', () => {
    expect(runtimeError(triple, { l: list(200) })).toBe('operation cancelled: actual cost limit exceeded');
    expect(run(triple, { l: list(10) })).toBe(true);
  });

  it('an over-budget error is not absorbed by || or exists (which absorb other errors when the other side decides)', () => {
    expect(runtimeError(`${triple} || true`, { l: list(200) })).toBe('operation cancelled: actual cost limit exceeded');
    // x == 0 runs over budget; x == 1 is true, and exists absorbs the first iteration's error.
    expect(runtimeError(`claims.l.exists(x, x == 0 ? ${triple} : true)`, { l: list(200) })).toBe('operation cancelled: actual cost limit exceeded');
  });

  it('a regular expression is charged by input × program size before it runs, and not run over budget', () => {
    // `.{1000}.{1000}` is 2,002 RE2 instructions: 101 × 2,002 × 0.3 = 60,661 for 100 characters ...
    expect(run("claims.x.matches('.{1000}.{1000}')", { x: 'a'.repeat(100) })).toBe(false);
    // ... and 2,001 × 2,002 × 0.3 = 1,201,801 for 2,000: refused before RE2 takes a step.
    expect(runtimeError("claims.x.matches('.{1000}.{1000}')", { x: 'a'.repeat(2000) })).toBe('operation cancelled: actual cost limit exceeded');
    expect(runtimeError("claims.x.find('.{1000}.{1000}')", { x: 'a'.repeat(2000) })).toBe('operation cancelled: actual cost limit exceeded');
  });

  it('a token refused for its cost gets kube-apiserver\'s message', () => {
    const a = entry({ claimMappings: { username: { claim: 'sub', prefix: '' } }, claimValidationRules: [{ expression: triple, message: 'never' }] });
    expect(refusal(a, { sub: 'alice', l: list(200).map(Number) })).toEqual({
      reason: 'expression_error',
      message: `oidc: error evaluating claim validation expression: expression '${triple}' resulted in error: operation cancelled: actual cost limit exceeded`,
    });
  });
});
