/**
 * `SessionRecordingConfiguration` (`kube-stream-proxy.io/v1alpha1`): the versioned file kind of
 * `serve --session-recording-config FILE`, decoded strictly (unknown fields are errors, as
 * kube-apiserver's config files are) and validated with field paths, in Kubernetes' `field.Error`
 * wording (`rules[1].record: Unsupported value: "all": supported values: "none", "output", "full"`).
 *
 * ```yaml
 * apiVersion: kube-stream-proxy.io/v1alpha1
 * kind: SessionRecordingConfiguration
 * rules:                       # ordered; the first rule that matches decides; none: not recorded
 * - name: prod-shells          # optional, unique; shown in logs and the recording's index
 *   match:                     # every field given must match; a list matches when any entry does
 *     users: ["alice", "system:serviceaccount:ci:*"]   # `*` matches any run of characters
 *     groups: ["sre"]
 *     clusters: ["prod-*"]     # agent clusters (/clusters/NAME); "" is the proxy's own upstream
 *     namespaces: ["prod"]
 *     pods: ["db-*"]
 *     containers: ["postgres"]
 *     subresources: [exec, attach, portforward]
 *     tty: true
 *   record: full               # none | output (stdout, stderr) | full (stdin too)
 *   enforce: true              # fail closed: no recording, no session (default false)
 * ```
 */
import type { RecordMode, RecordingPolicy, RecordingRule, RuleMatch } from './policy.js';
import { compilePattern } from './policy.js';

/** The apiVersion of the kind. */
export const RECORDING_CONFIG_API_VERSION = 'kube-stream-proxy.io/v1alpha1';
/** The kind. */
export const RECORDING_CONFIG_KIND = 'SessionRecordingConfiguration';

/** Most rules in one file. */
export const MAX_RULES = 256;

const RECORD_MODES: readonly RecordMode[] = ['none', 'output', 'full'];
const SUBRESOURCES = ['exec', 'attach', 'portforward'] as const;
const MATCH_LISTS = ['users', 'groups', 'clusters', 'namespaces', 'pods', 'containers'] as const;

/** One validation error: a field path and a message (`field.Error.Error()` shape). */
export interface FieldError {
  field: string;
  message: string;
}

/** The file did not validate: every error, each with its field path. */
export class RecordingConfigInvalid extends Error {
  override readonly name = 'RecordingConfigInvalid';
  constructor(readonly errors: readonly FieldError[]) {
    super(errors.map((e) => `${e.field}: ${e.message}`).join('\n'));
  }
}

const quote = (v: unknown): string => JSON.stringify(v);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkKnown(obj: Record<string, unknown>, path: string, known: readonly string[], errs: FieldError[]): void {
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) errs.push({ field: path === '' ? k : `${path}.${k}`, message: `unknown field ${quote(k)}` });
  }
}

function stringList(v: unknown, path: string, errs: FieldError[], allowEmptyString: boolean): string[] | undefined {
  if (!Array.isArray(v)) {
    errs.push({ field: path, message: `Invalid value: ${quote(v)}: must be a list of strings` });
    return undefined;
  }
  if (v.length === 0) {
    errs.push({ field: path, message: 'Required value: must not be empty (leave the field out to match anything)' });
    return undefined;
  }
  const out: string[] = [];
  const seen = new Set<string>();
  v.forEach((item, i) => {
    const p = `${path}[${i}]`;
    if (typeof item !== 'string') return errs.push({ field: p, message: `Invalid value: ${quote(item)}: must be a string` });
    if (item === '' && !allowEmptyString) return errs.push({ field: p, message: 'Required value' });
    if (seen.has(item)) return errs.push({ field: p, message: `Duplicate value: ${quote(item)}` });
    seen.add(item);
    out.push(item);
  });
  return out;
}

function parseMatch(v: unknown, path: string, errs: FieldError[]): RuleMatch {
  const match: RuleMatch = {};
  if (v === undefined || v === null) return match;
  if (!isObject(v)) {
    errs.push({ field: path, message: `Invalid value: ${quote(v)}: must be an object` });
    return match;
  }
  checkKnown(v, path, [...MATCH_LISTS, 'subresources', 'tty'], errs);
  for (const key of MATCH_LISTS) {
    if (v[key] === undefined) continue;
    const list = stringList(v[key], `${path}.${key}`, errs, key === 'clusters');
    if (list) match[key] = list.map(compilePattern);
  }
  if (v.subresources !== undefined) {
    const list = stringList(v.subresources, `${path}.subresources`, errs, false);
    if (list) {
      const ok: Array<(typeof SUBRESOURCES)[number]> = [];
      list.forEach((s, i) => {
        if ((SUBRESOURCES as readonly string[]).includes(s)) ok.push(s as (typeof SUBRESOURCES)[number]);
        else errs.push({ field: `${path}.subresources[${i}]`, message: `Unsupported value: ${quote(s)}: supported values: ${SUBRESOURCES.map(quote).join(', ')}` });
      });
      match.subresources = ok;
    }
  }
  if (v.tty !== undefined) {
    if (typeof v.tty !== 'boolean') errs.push({ field: `${path}.tty`, message: `Invalid value: ${quote(v.tty)}: must be true or false` });
    else match.tty = v.tty;
  }
  return match;
}

/**
 * Decode and validate one configuration object (the YAML/JSON document already parsed). Throws
 * {@link RecordingConfigInvalid} with every error found.
 */
export function parseRecordingConfig(doc: unknown): RecordingPolicy {
  const errs: FieldError[] = [];
  if (!isObject(doc)) throw new RecordingConfigInvalid([{ field: '<root>', message: `Invalid value: expected a ${RECORDING_CONFIG_KIND} object` }]);
  checkKnown(doc, '', ['apiVersion', 'kind', 'rules'], errs);
  if (doc.apiVersion === undefined) errs.push({ field: 'apiVersion', message: 'Required value' });
  else if (doc.apiVersion !== RECORDING_CONFIG_API_VERSION) {
    errs.push({ field: 'apiVersion', message: `Unsupported value: ${quote(doc.apiVersion)}: supported values: ${quote(RECORDING_CONFIG_API_VERSION)}` });
  }
  if (doc.kind === undefined) errs.push({ field: 'kind', message: 'Required value' });
  else if (doc.kind !== RECORDING_CONFIG_KIND) errs.push({ field: 'kind', message: `Unsupported value: ${quote(doc.kind)}: supported values: ${quote(RECORDING_CONFIG_KIND)}` });
  const rules: RecordingRule[] = [];
  const rawRules = doc.rules ?? [];
  if (!Array.isArray(rawRules)) errs.push({ field: 'rules', message: `Invalid value: ${quote(rawRules)}: must be a list` });
  else if (rawRules.length > MAX_RULES) errs.push({ field: 'rules', message: `Too many: ${rawRules.length}: must have at most ${MAX_RULES} items` });
  else {
    const names = new Set<string>();
    rawRules.forEach((r, i) => {
      const path = `rules[${i}]`;
      if (!isObject(r)) return errs.push({ field: path, message: `Invalid value: ${quote(r)}: must be an object` });
      checkKnown(r, path, ['name', 'match', 'record', 'enforce'], errs);
      let name: string | undefined;
      if (r.name !== undefined) {
        if (typeof r.name !== 'string' || r.name === '') errs.push({ field: `${path}.name`, message: `Invalid value: ${quote(r.name)}: must be a non-empty string` });
        else if (names.has(r.name)) errs.push({ field: `${path}.name`, message: `Duplicate value: ${quote(r.name)}` });
        else names.add((name = r.name));
      }
      const match = parseMatch(r.match, `${path}.match`, errs);
      let record: RecordMode = 'none';
      if (r.record === undefined) errs.push({ field: `${path}.record`, message: `Required value: one of ${RECORD_MODES.map(quote).join(', ')}` });
      else if (!RECORD_MODES.includes(r.record as RecordMode)) {
        errs.push({ field: `${path}.record`, message: `Unsupported value: ${quote(r.record)}: supported values: ${RECORD_MODES.map(quote).join(', ')}` });
      } else record = r.record as RecordMode;
      let enforce = false;
      if (r.enforce !== undefined) {
        if (typeof r.enforce !== 'boolean') errs.push({ field: `${path}.enforce`, message: `Invalid value: ${quote(r.enforce)}: must be true or false` });
        else enforce = r.enforce;
      }
      if (enforce && record === 'none') errs.push({ field: `${path}.enforce`, message: 'Invalid value: true: enforce needs record "output" or "full"' });
      rules.push({ name: name ?? `rules[${i}]`, match, record, enforce });
    });
  }
  if (errs.length > 0) throw new RecordingConfigInvalid(errs);
  return { rules };
}
