/**
 * `fieldSelector` and `labelSelector` for pod lists and watches (and, through {@link labelSelector}
 * and {@link fieldSelector}, for the other stored objects), in the equality-based forms that
 * kubectl uses (`metadata.name=demo`, `app=web,tier!=db`, `app`, `!app`).
 */
import { errorStatus } from '../../src/status.js';
import { NODE_NAME } from './nodes.js';
import type { Parsed } from './stream-options.js';
import type { Pod } from './pod.js';

/** A compiled selector: true when the pod matches. */
export type PodPredicate = (pod: Pod) => boolean;

const FIELDS: Record<string, (p: Pod) => string> = {
  'metadata.name': (p) => p.name,
  'metadata.namespace': (p) => p.namespace,
  'spec.nodeName': () => NODE_NAME,
  'status.phase': () => 'Running',
  'spec.restartPolicy': () => 'Always',
};

/** A compiled label selector: true when the labels match. */
export type LabelPredicate = (labels: Readonly<Record<string, string>>) => boolean;

/**
 * Compile an equality-based label selector (`app=web,tier!=db`, `app`, `!app`), or the 400 Status
 * the apiserver gives.
 */
export function labelSelector(value: string | null): Parsed<LabelPredicate> {
  const tests: LabelPredicate[] = [];
  for (const term of splitTerms(value)) {
    const eq = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (eq) {
      const [, key, op, want] = eq as unknown as [string, string, string, string];
      tests.push(op === '!=' ? (l) => l[key] !== want : (l) => l[key] === want);
      continue;
    }
    const exists = /^(!?)([^!=\s]+)$/.exec(term);
    if (!exists) return { ok: false, status: errorStatus(400, `unable to parse requirement: "${term}"`) };
    const key = exists[2]!;
    tests.push(exists[1] ? (l) => !(key in l) : (l) => key in l);
  }
  return { ok: true, value: (labels) => tests.every((t) => t(labels)) };
}

/**
 * Compile a field selector (`a.b=x,c!=y`) over `get(field)`; `supported` says which fields the
 * resource allows (else 400 `field label not supported`).
 */
export function fieldSelector<T>(
  value: string | null,
  supported: (field: string) => boolean,
  get: (item: T, field: string) => string,
): Parsed<(item: T) => boolean> {
  const tests: ((item: T) => boolean)[] = [];
  for (const term of splitTerms(value)) {
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) return { ok: false, status: errorStatus(400, `invalid field selector: "${term}"`) };
    const field = m[1]!;
    if (!supported(field)) return { ok: false, status: errorStatus(400, `field label not supported: ${field}`) };
    const want = m[3]!;
    tests.push(m[2] === '!=' ? (i) => get(i, field) !== want : (i) => get(i, field) === want);
  }
  return { ok: true, value: (item) => tests.every((t) => t(item)) };
}

/** Compile both selectors of `query` into one predicate, or the 400 Status the apiserver gives. */
export function podSelector(query: URLSearchParams): Parsed<PodPredicate> {
  const fields = fieldSelector<Pod>(query.get('fieldSelector'), (f) => f in FIELDS, (p, f) => FIELDS[f]!(p));
  if (!fields.ok) return fields;
  const labels = labelSelector(query.get('labelSelector'));
  if (!labels.ok) return labels;
  return { ok: true, value: (pod) => fields.value(pod) && labels.value(pod.labels) };
}

function splitTerms(value: string | null): string[] {
  if (!value) return [];
  return value
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}
