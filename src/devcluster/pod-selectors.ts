/**
 * `fieldSelector` and `labelSelector` for pod lists and watches, in the equality-based forms that
 * kubectl uses (`metadata.name=demo`, `app=web,tier!=db`, `app`, `!app`).
 */
import { errorStatus } from '../status.js';
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

/** Compile both selectors of `query` into one predicate, or the 400 Status the apiserver gives. */
export function podSelector(query: URLSearchParams): Parsed<PodPredicate> {
  const tests: PodPredicate[] = [];
  for (const term of splitTerms(query.get('fieldSelector'))) {
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) return { ok: false, status: errorStatus(400, `invalid field selector: "${term}"`) };
    const get = FIELDS[m[1]!];
    if (!get) return { ok: false, status: errorStatus(400, `field label not supported: ${m[1]}`) };
    const want = m[3]!;
    tests.push(m[2] === '!=' ? (p) => get(p) !== want : (p) => get(p) === want);
  }
  for (const term of splitTerms(query.get('labelSelector'))) {
    const eq = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (eq) {
      const [, key, op, want] = eq as unknown as [string, string, string, string];
      tests.push(op === '!=' ? (p) => p.labels[key] !== want : (p) => p.labels[key] === want);
      continue;
    }
    const exists = /^(!?)([^!=\s]+)$/.exec(term);
    if (!exists) return { ok: false, status: errorStatus(400, `unable to parse requirement: "${term}"`) };
    const key = exists[2]!;
    tests.push(exists[1] ? (p) => !(key in p.labels) : (p) => key in p.labels);
  }
  return { ok: true, value: (pod) => tests.every((t) => t(pod)) };
}

function splitTerms(value: string | null): string[] {
  if (!value) return [];
  return value
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}
