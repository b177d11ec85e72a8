/**
 * `labelSelector` and `fieldSelector` of metrics list requests. Label selectors take the whole
 * syntax of apimachinery's `labels.Parse`: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
 * `k` and `!k`, comma-separated (an AND). Field selectors take `metadata.name` and
 * `metadata.namespace` with `=`, `==` and `!=`, which is what metrics-server matches on
 * (`AddObjectMetaFieldsSet`). Errors are the 400 Status the apiserver answers. Pure.
 */
import { errorStatus, type V1Status } from '../../src/status.js';

/** What a selector looks at. */
export interface SelectableObject {
  name: string;
  namespace?: string;
  labels: Record<string, string>;
}

/** A compiled selector, or the Status explaining why it is not one. */
export type SelectorResult = { ok: true; matches: (o: SelectableObject) => boolean } | { ok: false; status: V1Status };

/** Split on the commas that are not inside parentheses. */
function splitTerms(text: string): string[] | undefined {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const c of text) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (depth < 0 || depth > 1) return undefined;
    if (c === ',' && depth === 0) {
      terms.push(current.trim());
      current = '';
    } else current += c;
  }
  if (depth !== 0) return undefined;
  terms.push(current.trim());
  return terms.filter((t) => t !== '');
}

const KEY = String.raw`[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?`;
const VALUE = String.raw`(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?`;
const EQUALITY = new RegExp(`^(${KEY})\\s*(==|=|!=)\\s*(${VALUE})$`);
const SET = new RegExp(`^(${KEY})\\s+(in|notin)\\s*\\(([^()]*)\\)$`);
const EXISTS = new RegExp(`^(!?)\\s*(${KEY})$`);

/** Compile `labelSelector` (empty or absent: everything). */
export function parseLabelSelector(text: string | null | undefined): SelectorResult {
  const tests: ((l: Record<string, string>) => boolean)[] = [];
  const terms = splitTerms(text ?? '');
  const bad = (term: string): SelectorResult => ({ ok: false, status: errorStatus(400, `unable to parse requirement: ${JSON.stringify(term)}`) });
  if (!terms) return bad(text ?? '');
  for (const term of terms) {
    let m = EQUALITY.exec(term);
    if (m) {
      const [, key, op, want] = m as unknown as [string, string, string, string];
      tests.push(op === '!=' ? (l) => l[key] !== want : (l) => l[key] === want);
      continue;
    }
    m = SET.exec(term);
    if (m) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = list.split(',').map((v) => v.trim());
      if (values.some((v) => !new RegExp(`^${VALUE}$`).test(v))) return bad(term);
      const set = new Set(values);
      tests.push(op === 'in' ? (l) => key in l && set.has(l[key]!) : (l) => !(key in l) || !set.has(l[key]!));
      continue;
    }
    m = EXISTS.exec(term);
    if (m) {
      const key = m[2]!;
      tests.push(m[1] ? (l) => !(key in l) : (l) => key in l);
      continue;
    }
    return bad(term);
  }
  return { ok: true, matches: (o) => tests.every((t) => t(o.labels)) };
}

/** Compile `fieldSelector` (empty or absent: everything). */
export function parseFieldSelector(text: string | null | undefined): SelectorResult {
  const tests: ((o: SelectableObject) => boolean)[] = [];
  for (const term of (text ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '')) {
    const m = /^([^!=\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) return { ok: false, status: errorStatus(400, `invalid selector: '${term}'; can't understand '${term}'`) };
    const [, field, op, want] = m as unknown as [string, string, string, string];
    const get = field === 'metadata.name' ? (o: SelectableObject) => o.name : field === 'metadata.namespace' ? (o: SelectableObject) => o.namespace ?? '' : undefined;
    if (!get) return { ok: false, status: errorStatus(400, `field label not supported: ${field}`) };
    tests.push(op === '!=' ? (o) => get(o) !== want : (o) => get(o) === want);
  }
  return { ok: true, matches: (o) => tests.every((t) => t(o)) };
}
