/**
 * What a recording's index entry (`<id>.json`) and the identity in its cast header may hold: every
 * field's type, the enums, the dates. Index entries come from replicas (the recorder's ingest) and
 * from disk (the store reads whatever the directory holds), so nothing is trusted by shape: the
 * ingest refuses a summary with errors (400, each field named as apimachinery's `field.Error`
 * prints it), and the store lists an entry that fails as `invalid` instead of breaking the list.
 */
import { FieldError, FieldPath, invalid, required } from '../auth/field-errors.js';
import { CAST_HEADER_KEY, type CastIdentity } from './asciicast.js';
import { isRecordingId, type RecordingResult, type RecordingSummary } from './sink.js';

/** The values of `subresource`. */
export const SUBRESOURCES = ['exec', 'attach', 'portforward'] as const;
/** The values of `record`. */
export const RECORD_MODES = ['output', 'full', 'metadata'] as const;
/** The values of `result`. */
export const RESULTS: readonly RecordingResult[] = ['complete', 'truncated', 'gap', 'incomplete', 'terminated'];

/** RFC 3339 date-time (`toISOString()` writes it), with a time zone. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function unsupported(path: FieldPath, value: unknown, supported: readonly string[]): FieldError {
  return new FieldError('Unsupported value', path.toString(), value, `supported values: ${supported.map((s) => JSON.stringify(s)).join(', ')}`);
}

/** The outcome of {@link validateRecordingSummary}. */
export type SummaryValidation = { ok: true; summary: RecordingSummary } | { ok: false; errors: FieldError[] };

/**
 * Check an index entry. On success the summary holds exactly the known fields (unknown ones are
 * dropped: what is stored is what the readers understand).
 */
export function validateRecordingSummary(value: unknown): SummaryValidation {
  if (!isObject(value)) return { ok: false, errors: [invalid(FieldPath.of('summary'), Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value, 'must be a JSON object')] };
  const errors: FieldError[] = [];
  const out: Json = {};
  const p = (name: string): FieldPath => FieldPath.of(name);
  const need = (name: string): boolean => {
    if (value[name] !== undefined) return true;
    errors.push(required(p(name)));
    return false;
  };
  const str = (name: string, optional: boolean): void => {
    const v = value[name];
    if (v === undefined) return void (optional || errors.push(required(p(name))));
    if (typeof v !== 'string') return void errors.push(invalid(p(name), v, 'must be a string'));
    out[name] = v;
  };
  const oneOf = (name: string, values: readonly string[]): void => {
    if (!need(name)) return;
    const v = value[name];
    if (typeof v !== 'string' || !values.includes(v)) return void errors.push(unsupported(p(name), v, values));
    out[name] = v;
  };
  const list = (name: string): void => {
    const v = value[name];
    if (v === undefined) return;
    if (!isStringList(v)) return void errors.push(invalid(p(name), v, 'must be a list of strings'));
    out[name] = [...v];
  };
  const bool = (name: string, optional: boolean): void => {
    const v = value[name];
    if (v === undefined) return void (optional || errors.push(required(p(name))));
    if (typeof v !== 'boolean') return void errors.push(invalid(p(name), v, 'must be true or false'));
    out[name] = v;
  };
  const count = (name: string): void => {
    const v = value[name];
    if (v === undefined) return;
    if (!isCount(v)) return void errors.push(invalid(p(name), v, 'must be an integer >= 0'));
    out[name] = v;
  };

  if (need('id')) {
    if (typeof value.id !== 'string' || !isRecordingId(value.id)) errors.push(invalid(p('id'), value.id, 'must be a recording id (a UUIDv7)'));
    else out.id = value.id;
  }
  oneOf('subresource', SUBRESOURCES);
  for (const name of ['user', 'userUnknown', 'cluster', 'container', 'error', 'recordedBy']) str(name, true);
  for (const name of ['namespace', 'pod']) str(name, false);
  for (const name of ['groups', 'command', 'ports']) list(name);
  bool('tty', true);
  bool('enforce', false);
  oneOf('record', RECORD_MODES);
  if (need('start')) {
    const v = value.start;
    if (typeof v !== 'string' || !RFC3339.test(v) || !Number.isFinite(Date.parse(v))) errors.push(invalid(p('start'), v, 'must be an RFC 3339 date-time'));
    else out.start = v;
  }
  if (need('durationSeconds')) {
    const v = value.durationSeconds;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) errors.push(invalid(p('durationSeconds'), v, 'must be a number >= 0'));
    else out.durationSeconds = v;
  }
  if (!('exitCode' in value)) errors.push(required(p('exitCode')));
  else if (value.exitCode !== null && !(typeof value.exitCode === 'number' && Number.isSafeInteger(value.exitCode))) errors.push(invalid(p('exitCode'), value.exitCode, 'must be an integer or null'));
  else out.exitCode = value.exitCode;
  for (const name of ['recordedBytes', 'bytesToUpstream', 'bytesToClient', 'castBytes']) count(name);
  oneOf('result', RESULTS);
  if (value.sha256 !== undefined) {
    if (typeof value.sha256 !== 'string' || !SHA256_HEX.test(value.sha256)) errors.push(invalid(p('sha256'), value.sha256, 'must be 64 lower-case hex digits'));
    else out.sha256 = value.sha256;
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, summary: out as unknown as RecordingSummary };
}

/** The identity a cast header holds, each field only when well typed; `timestamp` in seconds. */
export interface HeaderFacts {
  identity: Partial<CastIdentity>;
  timestamp?: number;
}

/** The well-typed parts of a parsed cast header (`{}` when there is none). */
export function headerFacts(header: unknown): HeaderFacts {
  if (!isObject(header)) return { identity: {} };
  const k = header[CAST_HEADER_KEY];
  const id: Partial<Record<keyof CastIdentity, unknown>> = {};
  if (isObject(k)) {
    for (const name of ['sessionId', 'user', 'userUnknown', 'cluster', 'namespace', 'pod', 'container', 'recordedBy'] as const) if (typeof k[name] === 'string') id[name] = k[name];
    for (const name of ['groups', 'command'] as const) if (isStringList(k[name])) id[name] = [...k[name]];
    if (k.subresource === 'exec' || k.subresource === 'attach') id.subresource = k.subresource;
    if (k.record === 'output' || k.record === 'full') id.record = k.record;
    if (typeof k.tty === 'boolean') id.tty = k.tty;
  }
  const ts = header.timestamp;
  return { identity: id as Partial<CastIdentity>, ...(typeof ts === 'number' && Number.isFinite(ts) && ts >= 0 ? { timestamp: ts } : {}) };
}
