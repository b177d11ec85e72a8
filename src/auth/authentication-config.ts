/**
 * kube-apiserver's `--authentication-config` file: the `AuthenticationConfiguration` type of
 * `apiserver.config.k8s.io` (`v1`, `v1beta1` and `v1alpha1`, whose `jwt` and `anonymous` fields are the
 * same) and its strict decoding from YAML or JSON, as `loadAuthenticationConfigFromData` decodes it
 * (kubernetes/kubernetes `pkg/kubeapiserver/options/authentication.go`, `serializer.EnableStrict`):
 * an unknown or duplicate field, or a value of the wrong JSON type, is an error; an empty file is
 * "empty config data". Semantic validation (field paths, CEL) is `authentication-config-validation.ts`.
 */
import { CORE_SCHEMA, load as loadYaml } from 'js-yaml';

/** The group of the configuration file's `apiVersion`. */
export const AUTHENTICATION_CONFIG_GROUP = 'apiserver.config.k8s.io';

/** The versions read (kube-apiserver 1.34 serves the same three). */
export const AUTHENTICATION_CONFIG_VERSIONS = ['v1', 'v1beta1', 'v1alpha1'] as const;

/** `AudienceMatchPolicyMatchAny`, the only policy there is. */
export const AUDIENCE_MATCH_ANY = 'MatchAny';

/** `jwt[].issuer`. */
export interface Issuer {
  /** Must equal the token's `iss` and the discovery document's `issuer`, byte for byte. */
  url: string;
  /** Where the discovery document is, used as given (default: `url` + `/.well-known/openid-configuration`). */
  discoveryURL: string;
  /** PEM CA bundle: the only trust for discovery and JWKS when set; the system roots otherwise. */
  certificateAuthority: string;
  /** At least one must be in the token's `aud`. */
  audiences: string[];
  /** `MatchAny` or empty. */
  audienceMatchPolicy: string;
  /** `controlplane` or `cluster` in kube-apiserver; this proxy has one dialer for both. */
  egressSelectorType: string;
}

/** `jwt[].claimValidationRules[]`: a required claim value, or a CEL condition over `claims`. */
export interface ClaimValidationRule {
  claim: string;
  requiredValue: string;
  expression: string;
  message: string;
}

/** `claimMappings.username` / `groups`: a claim with a prefix, or a CEL expression. */
export interface PrefixedClaimOrExpression {
  claim: string;
  /** Absent (undefined) differs from `""`: a claim mapping needs the field, even empty. */
  prefix?: string;
  expression: string;
}

/** `claimMappings.uid`: a claim or a CEL expression. */
export interface ClaimOrExpression {
  claim: string;
  expression: string;
}

/** `claimMappings.extra[]`. */
export interface ExtraMapping {
  key: string;
  valueExpression: string;
}

/** `jwt[].claimMappings`. */
export interface ClaimMappings {
  username: PrefixedClaimOrExpression;
  groups: PrefixedClaimOrExpression;
  uid: ClaimOrExpression;
  extra: ExtraMapping[];
}

/** `jwt[].userValidationRules[]`: a CEL condition over the mapped `user`. */
export interface UserValidationRule {
  expression: string;
  message: string;
}

/** One `jwt[]` entry (kube-apiserver's `JWTAuthenticator` type): an issuer and how its tokens become users. */
export interface JwtAuthenticatorConfig {
  issuer: Issuer;
  claimValidationRules: ClaimValidationRule[];
  claimMappings: ClaimMappings;
  userValidationRules: UserValidationRule[];
}

/** `anonymous.conditions[]`. */
export interface AnonymousAuthCondition {
  path: string;
}

/** `anonymous`. */
export interface AnonymousAuthConfig {
  enabled: boolean;
  conditions: AnonymousAuthCondition[];
}

/** The whole file, decoded (absent fields have Go's zero values). */
export interface AuthenticationConfiguration {
  /** The `apiVersion` it came with (`apiserver.config.k8s.io/v1`...); empty when built from flags. */
  apiVersion: string;
  jwt: JwtAuthenticatorConfig[];
  /** Absent when the file does not configure it (the `--anonymous-auth` flag then decides). */
  anonymous?: AnonymousAuthConfig;
}

/** The file could not be decoded (it is not a strictly valid AuthenticationConfiguration). */
export class AuthenticationConfigDecodeError extends Error {
  override readonly name = 'AuthenticationConfigDecodeError';
  readonly code = 'KSP_ERR_AUTHENTICATION_CONFIG_DECODE' as const;
}

type FieldKind = 'string' | 'bool' | 'strings' | { object: Schema } | { list: Schema };
interface Schema {
  /** Go type name, for type errors. */
  type: string;
  fields: Record<string, FieldKind>;
}

const ISSUER: Schema = {
  type: 'Issuer',
  fields: {
    url: 'string',
    discoveryURL: 'string',
    certificateAuthority: 'string',
    audiences: 'strings',
    audienceMatchPolicy: 'string',
    egressSelectorType: 'string',
  },
};
const CLAIM_VALIDATION_RULE: Schema = {
  type: 'ClaimValidationRule',
  fields: { claim: 'string', requiredValue: 'string', expression: 'string', message: 'string' },
};
const PREFIXED: Schema = { type: 'PrefixedClaimOrExpression', fields: { claim: 'string', prefix: 'string', expression: 'string' } };
const CLAIM_OR_EXPRESSION: Schema = { type: 'ClaimOrExpression', fields: { claim: 'string', expression: 'string' } };
const EXTRA: Schema = { type: 'ExtraMapping', fields: { key: 'string', valueExpression: 'string' } };
const CLAIM_MAPPINGS: Schema = {
  type: 'ClaimMappings',
  fields: { username: { object: PREFIXED }, groups: { object: PREFIXED }, uid: { object: CLAIM_OR_EXPRESSION }, extra: { list: EXTRA } },
};
const USER_VALIDATION_RULE: Schema = { type: 'UserValidationRule', fields: { expression: 'string', message: 'string' } };
const JWT: Schema = {
  type: 'JWTAuthenticator',
  fields: {
    issuer: { object: ISSUER },
    claimValidationRules: { list: CLAIM_VALIDATION_RULE },
    claimMappings: { object: CLAIM_MAPPINGS },
    userValidationRules: { list: USER_VALIDATION_RULE },
  },
};
const ANONYMOUS: Schema = {
  type: 'AnonymousAuthConfig',
  fields: { enabled: 'bool', conditions: { list: { type: 'AnonymousAuthCondition', fields: { path: 'string' } } } },
};
const ROOT: Schema = {
  type: 'AuthenticationConfiguration',
  fields: { apiVersion: 'string', kind: 'string', jwt: { list: JWT }, anonymous: { object: ANONYMOUS } },
};

/** JSON's name for a value's type, as Go's decoder reports it. */
function jsonType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'object';
  return typeof v === 'boolean' ? 'bool' : typeof v;
}

/** Strict decoding of `value` against `schema`; problems are appended to `errors`. */
function decodeObject(value: Record<string, unknown>, schema: Schema, path: string, errors: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const unknown: string[] = [];
  for (const [name, v] of Object.entries(value)) {
    const kind = schema.fields[name];
    const p = path === '' ? name : `${path}.${name}`;
    if (kind === undefined) {
      unknown.push(`unknown field "${p}"`);
      continue;
    }
    if (v === null) continue; // JSON null leaves Go's zero value (a nil pointer for `prefix`).
    const bad = (goType: string): void => {
      errors.push(`cannot unmarshal ${jsonType(v)} into field "${p}" of type ${goType}`);
    };
    if (kind === 'string') {
      if (typeof v === 'string') out[name] = v;
      else bad('string');
    } else if (kind === 'bool') {
      if (typeof v === 'boolean') out[name] = v;
      else bad('bool');
    } else if (kind === 'strings') {
      if (!Array.isArray(v)) bad('[]string');
      else {
        const items: string[] = [];
        v.forEach((item, i) => {
          if (typeof item === 'string') items.push(item);
          else errors.push(`cannot unmarshal ${jsonType(item)} into field "${p}[${i}]" of type string`);
        });
        out[name] = items;
      }
    } else if ('object' in kind) {
      if (typeof v !== 'object' || Array.isArray(v)) bad(kind.object.type);
      else out[name] = decodeObject(v as Record<string, unknown>, kind.object, p, errors);
    } else if (!Array.isArray(v)) bad(`[]${kind.list.type}`);
    else {
      out[name] = v.map((item, i) => {
        if (item === null || typeof item !== 'object' || Array.isArray(item)) {
          errors.push(`cannot unmarshal ${jsonType(item)} into field "${p}[${i}]" of type ${kind.list.type}`);
          return {};
        }
        return decodeObject(item as Record<string, unknown>, kind.list, `${p}[${i}]`, errors);
      });
    }
  }
  if (unknown.length) errors.push(`strict decoding error: ${unknown.join(', ')}`);
  return out;
}

type Decoded = Record<string, unknown>;
const str = (o: Decoded | undefined, k: string): string => (o?.[k] as string | undefined) ?? '';
const obj = (o: Decoded | undefined, k: string): Decoded | undefined => o?.[k] as Decoded | undefined;
const list = (o: Decoded | undefined, k: string): Decoded[] => (o?.[k] as Decoded[] | undefined) ?? [];

function prefixed(o: Decoded | undefined): PrefixedClaimOrExpression {
  const p: PrefixedClaimOrExpression = { claim: str(o, 'claim'), expression: str(o, 'expression') };
  if (typeof o?.prefix === 'string') p.prefix = o.prefix;
  return p;
}

function jwtAuthenticator(j: Decoded): JwtAuthenticatorConfig {
  const issuer = obj(j, 'issuer');
  const mappings = obj(j, 'claimMappings');
  return {
    issuer: {
      url: str(issuer, 'url'),
      discoveryURL: str(issuer, 'discoveryURL'),
      certificateAuthority: str(issuer, 'certificateAuthority'),
      audiences: (issuer?.audiences as string[] | undefined) ?? [],
      audienceMatchPolicy: str(issuer, 'audienceMatchPolicy'),
      egressSelectorType: str(issuer, 'egressSelectorType'),
    },
    claimValidationRules: list(j, 'claimValidationRules').map((r) => ({
      claim: str(r, 'claim'),
      requiredValue: str(r, 'requiredValue'),
      expression: str(r, 'expression'),
      message: str(r, 'message'),
    })),
    claimMappings: {
      username: prefixed(obj(mappings, 'username')),
      groups: prefixed(obj(mappings, 'groups')),
      uid: { claim: str(obj(mappings, 'uid'), 'claim'), expression: str(obj(mappings, 'uid'), 'expression') },
      extra: list(mappings, 'extra').map((e) => ({ key: str(e, 'key'), valueExpression: str(e, 'valueExpression') })),
    },
    userValidationRules: list(j, 'userValidationRules').map((r) => ({ expression: str(r, 'expression'), message: str(r, 'message') })),
  };
}

/**
 * Decode an AuthenticationConfiguration file (YAML or JSON) strictly. Throws
 * {@link AuthenticationConfigDecodeError} with every decoding problem in its message.
 */
export function decodeAuthenticationConfiguration(data: string): AuthenticationConfiguration {
  if (data.length === 0) throw new AuthenticationConfigDecodeError('empty config data');
  let doc: unknown;
  try {
    // js-yaml refuses duplicate keys (in JSON input too), as the strict decoder does. The core
    // schema (YAML 1.2: null, bool, int, float, string) keeps dates and the like as strings.
    doc = loadYaml(data, { schema: CORE_SCHEMA, json: false });
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new AuthenticationConfigDecodeError(`yaml: ${reason}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new AuthenticationConfigDecodeError("Object 'Kind' is missing");
  const top = doc as Decoded;
  if (typeof top.kind !== 'string' || top.kind === '') throw new AuthenticationConfigDecodeError("Object 'Kind' is missing");
  const apiVersion = typeof top.apiVersion === 'string' ? top.apiVersion : '';
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  if (group !== AUTHENTICATION_CONFIG_GROUP || !(AUTHENTICATION_CONFIG_VERSIONS as readonly string[]).includes(version)) {
    throw new AuthenticationConfigDecodeError(`no kind "${top.kind}" is registered for version "${apiVersion}" in scheme`);
  }
  if (top.kind !== 'AuthenticationConfiguration') {
    throw new AuthenticationConfigDecodeError(`expected AuthenticationConfiguration, got kind "${top.kind}"`);
  }
  const errors: string[] = [];
  const decoded = decodeObject(top, ROOT, '', errors);
  if (errors.length) throw new AuthenticationConfigDecodeError(errors.join('; '));
  const config: AuthenticationConfiguration = { apiVersion, jwt: list(decoded, 'jwt').map(jwtAuthenticator) };
  const anonymous = obj(decoded, 'anonymous');
  if (anonymous) {
    config.anonymous = {
      enabled: anonymous.enabled === true,
      conditions: list(anonymous, 'conditions').map((c) => ({ path: str(c, 'path') })),
    };
  }
  return config;
}
