import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AuthenticationConfigDecodeError, decodeAuthenticationConfiguration, type AuthenticationConfiguration } from '../../../src/auth/authentication-config.js';
import { validateAuthenticationConfiguration } from '../../../src/auth/authentication-config-validation.js';
import { aggregateMessage } from '../../../src/auth/field-errors.js';

const fixture = (name: string): string => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8');

/** A minimal valid configuration; `jwt` entries can be patched per case. */
function config(jwt: unknown[] = [{}], extra = ''): string {
  const entries = jwt.map((j) =>
    JSON.stringify({
      issuer: { url: 'https://example.com', audiences: ['my-app'] },
      claimMappings: { username: { claim: 'sub', prefix: '' } },
      ...(j as object),
    }),
  );
  return `apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: [${entries.join(',')}]\n${extra}`;
}

const errorsOf = (text: string, disallowedIssuers: string[] = []): string[] =>
  validateAuthenticationConfiguration(decodeAuthenticationConfiguration(text), { disallowedIssuers }).errors.map(String);

const decodeError = (text: string): string => {
  try {
    decodeAuthenticationConfiguration(text);
  } catch (err) {
    expect(err).toBeInstanceOf(AuthenticationConfigDecodeError);
    return (err as Error).message;
  }
  throw new Error('decoded');
};

describe('decodeAuthenticationConfiguration', () => {
  it.each(['v1', 'v1beta1', 'v1alpha1'])('reads apiserver.config.k8s.io/%s', (version) => {
    const c = decodeAuthenticationConfiguration(config().replace('/v1\n', `/${version}\n`));
    expect(c.apiVersion).toBe(`apiserver.config.k8s.io/${version}`);
    expect(c.jwt[0]!.issuer).toEqual({ url: 'https://example.com', discoveryURL: '', certificateAuthority: '', audiences: ['my-app'], audienceMatchPolicy: '', egressSelectorType: '' });
    expect(c.jwt[0]!.claimMappings.username).toEqual({ claim: 'sub', prefix: '', expression: '' });
    expect(c.anonymous).toBeUndefined();
  });

  it('reads JSON as well as YAML, and keeps an absent prefix apart from an empty one', () => {
    const c = decodeAuthenticationConfiguration(
      JSON.stringify({
        apiVersion: 'apiserver.config.k8s.io/v1beta1',
        kind: 'AuthenticationConfiguration',
        jwt: [{ issuer: { url: 'https://a', audiences: ['x'] }, claimMappings: { username: { claim: 'email' }, groups: { claim: 'g', prefix: '' } } }],
        anonymous: { enabled: true, conditions: [{ path: '/livez' }] },
      }),
    );
    expect(c.jwt[0]!.claimMappings.username.prefix).toBeUndefined();
    expect(c.jwt[0]!.claimMappings.groups.prefix).toBe('');
    expect(c.anonymous).toEqual({ enabled: true, conditions: [{ path: '/livez' }] });
  });

  it.each<[string, string, string]>([
    ['empty file', '', 'empty config data'],
    ['no kind', 'apiVersion: apiserver.config.k8s.io/v1\n', "Object 'Kind' is missing"],
    ['not an object', '- a\n- b\n', "Object 'Kind' is missing"],
    ['other version', config().replace('/v1\n', '/v2\n'), 'no kind "AuthenticationConfiguration" is registered for version "apiserver.config.k8s.io/v2" in scheme'],
    ['other kind', config().replace('kind: AuthenticationConfiguration', 'kind: AuthorizationConfiguration'), 'expected AuthenticationConfiguration, got kind "AuthorizationConfiguration"'],
    ['unknown field', config([{ issuer: { url: 'https://a', audiences: ['x'], audience: 'y' } }]), 'strict decoding error: unknown field "jwt[0].issuer.audience"'],
    ['unknown top-level field', config([], 'authorizers: []\n'), 'strict decoding error: unknown field "authorizers"'],
    ['a string for a list', config([{ issuer: { url: 'https://a', audiences: 'x' } }]), 'cannot unmarshal string into field "jwt[0].issuer.audiences" of type []string'],
    ['a number for a string', config([{ claimValidationRules: [{ claim: 'hd', requiredValue: 1 }] }]), 'cannot unmarshal number into field "jwt[0].claimValidationRules[0].requiredValue" of type string'],
    ['a string for a bool', config([], 'anonymous: {enabled: "true"}\n'), 'cannot unmarshal string into field "anonymous.enabled" of type bool'],
    ['bad YAML', 'apiVersion: [', 'yaml: '],
  ])('%s: refused', (_name, text, message) => {
    expect(decodeError(text)).toContain(message);
  });

  it('refuses a duplicate field, in YAML and in JSON', () => {
    expect(decodeError('apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt: []\njwt: []\n')).toContain('duplicated mapping key');
    expect(decodeError('{"apiVersion":"apiserver.config.k8s.io/v1","kind":"AuthenticationConfiguration","jwt":[],"jwt":[]}')).toContain('duplicated mapping key');
  });

  it('keeps YAML dates and the like as strings (YAML 1.2 core schema)', () => {
    const c = decodeAuthenticationConfiguration(config([{ claimValidationRules: [{ claim: 'since', requiredValue: '2024-01-01' }] }]).replace('"2024-01-01"', '2024-01-01'));
    expect(c.jwt[0]!.claimValidationRules[0]!.requiredValue).toBe('2024-01-01');
  });
});

describe('validateAuthenticationConfiguration (kube-apiserver field paths and messages)', () => {
  it('accepts the minimal configuration', () => {
    expect(errorsOf(config())).toEqual([]);
  });

  it.each<[string, unknown, string[]]>([
    ['issuer url required', { issuer: { url: '', audiences: ['a'] } }, ['jwt[0].issuer.url: Required value']],
    ['https only', { issuer: { url: 'http://example.com', audiences: ['a'] } }, ['jwt[0].issuer.url: Invalid value: "http://example.com": URL scheme must be https']],
    ['no scheme', { issuer: { url: 'example.com', audiences: ['a'] } }, ['jwt[0].issuer.url: Invalid value: "example.com": URL scheme must be https']],
    ['user info', { issuer: { url: 'https://u:p@example.com', audiences: ['a'] } }, ['jwt[0].issuer.url: Invalid value: "https://u:p@example.com": URL must not contain a username or password']],
    ['query', { issuer: { url: 'https://example.com?x=1', audiences: ['a'] } }, ['jwt[0].issuer.url: Invalid value: "https://example.com?x=1": URL must not contain a query']],
    ['fragment', { issuer: { url: 'https://example.com#f', audiences: ['a'] } }, ['jwt[0].issuer.url: Invalid value: "https://example.com#f": URL must not contain a fragment']],
    ['discovery same as url', { issuer: { url: 'https://example.com', discoveryURL: 'https://example.com/', audiences: ['a'] } }, ['jwt[0].issuer.discoveryURL: Invalid value: "https://example.com/": discoveryURL must be different from URL']],
    ['discovery https only', { issuer: { url: 'https://example.com', discoveryURL: 'http://d.example.com/x', audiences: ['a'] } }, ['jwt[0].issuer.discoveryURL: Invalid value: "http://d.example.com/x": URL scheme must be https']],
    ['audiences required', { issuer: { url: 'https://example.com', audiences: [] } }, ['jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required']],
    [
      'empty and duplicate audiences, and no MatchAny',
      { issuer: { url: 'https://example.com', audiences: ['a', '', 'a'] } },
      ['jwt[0].issuer.audiences[1]: Required value', 'jwt[0].issuer.audiences[2]: Duplicate value: "a"', 'jwt[0].issuer.audienceMatchPolicy: Invalid value: "": audienceMatchPolicy must be MatchAny for multiple audiences'],
    ],
    ['single audience, other policy', { issuer: { url: 'https://example.com', audiences: ['a'], audienceMatchPolicy: 'MatchAll' } }, ['jwt[0].issuer.audienceMatchPolicy: Invalid value: "MatchAll": audienceMatchPolicy must be empty or MatchAny for single audience']],
    ['bad CA', { issuer: { url: 'https://example.com', audiences: ['a'], certificateAuthority: 'not a pem' } }, ['jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": data does not contain any valid RSA or ECDSA certificates']],
    ['egress selector', { issuer: { url: 'https://example.com', audiences: ['a'], egressSelectorType: 'etcd' } }, ['jwt[0].issuer.egressSelectorType: Invalid value: "etcd": egress selector must be either controlplane or cluster']],
    ['rule with claim and expression', { claimValidationRules: [{ claim: 'hd', expression: 'true' }] }, ['jwt[0].claimValidationRules[0]: Invalid value: "hd": claim and expression can\'t both be set']],
    ['empty rule', { claimValidationRules: [{}] }, ['jwt[0].claimValidationRules[0]: Required value: claim or expression is required']],
    ['message with claim', { claimValidationRules: [{ claim: 'hd', message: 'm' }] }, ['jwt[0].claimValidationRules[0].message: Invalid value: "m": may not be specified when claim is set']],
    ['requiredValue with expression', { claimValidationRules: [{ expression: 'true', requiredValue: 'v' }] }, ['jwt[0].claimValidationRules[0].requiredValue: Invalid value: "v": may not be specified when expression is set']],
    ['duplicate claim rule', { claimValidationRules: [{ claim: 'hd' }, { claim: 'hd' }] }, ['jwt[0].claimValidationRules[1].claim: Duplicate value: "hd"']],
    ['duplicate expression rule', { claimValidationRules: [{ expression: 'true' }, { expression: 'true' }] }, ['jwt[0].claimValidationRules[1].expression: Duplicate value: "true"']],
    ['rule not bool', { claimValidationRules: [{ expression: 'claims.hd' }] }, ['jwt[0].claimValidationRules[0].expression: Invalid value: "claims.hd": must evaluate to bool']],
    ['rule does not compile', { claimValidationRules: [{ expression: 'claims.hd ==' }] }, ['jwt[0].claimValidationRules[0].expression: Invalid value: "claims.hd ==": compilation failed: ERROR: <input>:1:13: Unexpected token: EOF']],
    ['rule reads user', { claimValidationRules: [{ expression: 'user.username == "a"' }] }, ['jwt[0].claimValidationRules[0].expression: Invalid value: "user.username == \\"a\\"": compilation failed: ERROR: <input>:1:1: Unknown variable: user']],
    ['username claim and expression', { claimMappings: { username: { claim: 'sub', prefix: '', expression: 'claims.sub' } } }, ['jwt[0].claimMappings.username: Invalid value: "": claim and expression can\'t both be set']],
    ['username required', { claimMappings: { username: {} } }, ['jwt[0].claimMappings.username: Required value: claim or expression is required']],
    ['username prefix required', { claimMappings: { username: { claim: 'sub' } } }, ['jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing']],
    ['prefix with expression', { claimMappings: { username: { expression: 'claims.sub', prefix: 'x' } } }, ['jwt[0].claimMappings.username.prefix: Invalid value: "x": may not be specified when expression is set']],
    ['groups prefix required', { claimMappings: { username: { claim: 'sub', prefix: '' }, groups: { claim: 'g' } } }, ['jwt[0].claimMappings.groups.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing']],
    ['uid claim and expression', { claimMappings: { username: { claim: 'sub', prefix: '' }, uid: { claim: 'sub', expression: 'claims.sub' } } }, ['jwt[0].claimMappings.uid: Invalid value: "": claim and expression can\'t both be set']],
    ['uid expression does not compile', { claimMappings: { username: { claim: 'sub', prefix: '' }, uid: { expression: 'claims.' } } }, ['jwt[0].claimMappings.uid.expression: Invalid value: "claims.": compilation failed: ERROR: <input>:1:8: Expected IDENTIFIER, got EOF']],
    [
      'extra keys',
      {
        claimMappings: {
          username: { claim: 'sub', prefix: '' },
          extra: [
            { key: 'tenant', valueExpression: 'claims.t' },
            { key: 'Example.com/Tenant', valueExpression: 'claims.t' },
            { key: 'kubernetes.io/x', valueExpression: 'claims.t' },
            { key: 'a.k8s.io/x', valueExpression: 'claims.t' },
            { key: 'example.com/t', valueExpression: '' },
            { key: 'example.com/t', valueExpression: 'claims.t' },
          ],
        },
      },
      [
        'jwt[0].claimMappings.extra[0].key: Invalid value: "tenant": must be a domain-prefixed path (such as "acme.io/foo")',
        `jwt[0].claimMappings.extra[1].key: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
        'jwt[0].claimMappings.extra[1].key: Invalid value: "Example.com/Tenant": must be lowercase',
        'jwt[0].claimMappings.extra[2].key: Invalid value: "kubernetes.io/x": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use',
        'jwt[0].claimMappings.extra[3].key: Invalid value: "a.k8s.io/x": k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use',
        'jwt[0].claimMappings.extra[4].valueExpression: Required value',
        'jwt[0].claimMappings.extra[5].key: Duplicate value: "example.com/t"',
      ],
    ],
    [
      'email without email_verified',
      { claimMappings: { username: { expression: 'claims.email' } } },
      ['jwt[0].claimMappings.username.expression: Invalid value: "claims.email": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression'],
    ],
    ['user rule required', { userValidationRules: [{ message: 'm' }] }, ['jwt[0].userValidationRules[0].expression: Required value']],
    ['user rule duplicate', { userValidationRules: [{ expression: 'true' }, { expression: 'true' }] }, ['jwt[0].userValidationRules[1].expression: Duplicate value: "true"']],
    ['user rule reads claims', { userValidationRules: [{ expression: 'claims.sub == "a"' }] }, ['jwt[0].userValidationRules[0].expression: Invalid value: "claims.sub == \\"a\\"": compilation failed: ERROR: <input>:1:1: Unknown variable: claims']],
    ['user rule not bool', { userValidationRules: [{ expression: 'user.username' }] }, ['jwt[0].userValidationRules[0].expression: Invalid value: "user.username": must evaluate to bool']],
  ])('%s', (_name, patch, expected) => {
    expect(errorsOf(config([patch]))).toEqual(expected);
  });

  it.each([
    ['email_verified in the username expression', { claimMappings: { username: { expression: 'claims.?email_verified.orValue(true) ? claims.email : ""' } } }],
    ['email_verified in a claim rule', { claimValidationRules: [{ expression: 'claims.?email_verified.orValue(true) == true' }], claimMappings: { username: { expression: 'claims.email' } } }],
    ['email_verified in an extra', { claimMappings: { username: { expression: 'claims.email' }, extra: [{ key: 'example.com/v', valueExpression: 'string(claims.email_verified)' }] } }],
    ['email through index syntax (not a selection)', { claimMappings: { username: { expression: 'claims["email"]' } } }],
  ])('email rule satisfied: %s', (_name, patch) => {
    expect(errorsOf(config([patch]))).toEqual([]);
  });

  it('across entries: duplicate issuer and discovery URLs, too many authenticators, disallowed issuers', () => {
    const dupes = config([
      { issuer: { url: 'https://example.com', discoveryURL: 'https://d.example.com/x', audiences: ['a'] } },
      { issuer: { url: 'https://example.com', discoveryURL: 'https://d.example.com/x', audiences: ['a'] } },
    ]);
    expect(errorsOf(dupes)).toEqual(['jwt[1].issuer.url: Duplicate value: "https://example.com"', 'jwt[1].issuer.discoveryURL: Duplicate value: "https://d.example.com/x"']);
    const many = config(Array.from({ length: 65 }, (_, i) => ({ issuer: { url: `https://e${i}.example.com`, audiences: ['a'] } })));
    expect(errorsOf(many)).toEqual(['jwt: Too many: 65: must have at most 64 items']);
    expect(errorsOf(config([{ issuer: { url: 'https://kubernetes.default.svc', audiences: ['a'] } }]), ['https://kubernetes.default.svc'])).toEqual([
      'jwt[0].issuer.url: Invalid value: "https://kubernetes.default.svc": URL must not overlap with disallowed issuers: [https://kubernetes.default.svc]',
    ]);
  });

  it('zero authenticators are valid (added later by a reload)', () => {
    expect(errorsOf('apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n')).toEqual([]);
  });

  it('anonymous conditions need enabled', () => {
    expect(errorsOf(config([], 'anonymous: {enabled: false, conditions: [{path: /livez}]}\n'))).toEqual([
      'anonymous.conditions: Invalid value: [{"path":"/livez"}]: enabled should be set to true when conditions are defined',
    ]);
    expect(errorsOf(config([], 'anonymous: {enabled: true, conditions: [{path: /livez}, {path: /readyz}, {path: /healthz}]}\n'))).toEqual([]);
  });

  it("golden: the documentation's annotated example is refused, naming each field", () => {
    const c: AuthenticationConfiguration = decodeAuthenticationConfiguration(fixture('docs-example.yaml'));
    const { errors } = validateAuthenticationConfiguration(c);
    expect(errors.map(String)).toEqual([
      'jwt[0].issuer.certificateAuthority: Invalid value: "<omitted>": data does not contain any valid RSA or ECDSA certificates',
      'jwt[0].issuer.egressSelectorType: Invalid value: "<egress-selector-type>": egress selector must be either controlplane or cluster',
      'jwt[0].claimMappings.username: Invalid value: "": claim and expression can\'t both be set',
      'jwt[0].claimMappings.groups: Invalid value: "": claim and expression can\'t both be set',
      'jwt[0].claimMappings.uid: Invalid value: "": claim and expression can\'t both be set',
    ]);
    expect(aggregateMessage(errors)).toMatch(/^\[jwt\[0\]\.issuer\.certificateAuthority: .*, jwt\[0\]\.claimMappings\.uid: Invalid value: "": claim and expression can't both be set\]$/);
  });

  it.each(['docs-valid-token.yaml', 'docs-fails-claim-validation.yaml', 'docs-fails-user-validation.yaml'])('golden: %s is valid', (name) => {
    expect(errorsOf(fixture(name))).toEqual([]);
  });
});
