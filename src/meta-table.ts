/**
 * Server-side printing, as kube-apiserver does it for `kubectl get`: when the Accept header asks
 * for `application/json;as=Table;v=v1;g=meta.k8s.io`, a list or object is answered as a
 * meta.k8s.io/v1 Table (column definitions plus one row of cells per object), each row carrying the
 * object as `includeObject` says (default: PartialObjectMetadata). The columns and cells of each
 * resource are in `dev/cluster/printers.ts` (the dev cluster) and `handlers/apiservices.ts` (the
 * proxy's own apiservices); this file is the Table shape, content negotiation and the age format.
 */
import { errorStatus, type V1Status } from './status.js';

/** A parsed value or the 400 Status refusing it. */
type Parsed<T> = { ok: true; value: T } | { ok: false; status: V1Status };

/** One `columnDefinitions` entry (metav1.TableColumnDefinition; every field is always written). */
export interface TableColumnDefinition {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  format: string;
  description: string;
  /** 0: always shown; 1 and above: only with `-o wide`. */
  priority: number;
}

/** The `Name` column every kube-apiserver Table starts with. */
export const NAME_COLUMN: TableColumnDefinition = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description:
    'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};

/** The `Age` column (the object's `creationTimestamp`). */
export const AGE_COLUMN: TableColumnDefinition = {
  name: 'Age',
  type: 'string',
  format: '',
  description:
    'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
  priority: 0,
};

/** What a Table row carries besides its cells (`?includeObject=`, metav1.IncludeObjectPolicy). */
export type IncludeObjectPolicy = 'None' | 'Metadata' | 'Object';

/** One printed object: its cells (in column order) and the object itself (with kind/apiVersion). */
export interface PrintedRow {
  cells: unknown[];
  object: Record<string, unknown>;
}

/**
 * True when `accept` prefers a meta.k8s.io/v1 Table over plain JSON: the first media range the dev
 * cluster can serve decides (kubectl sends `…as=Table;v=v1;g=meta.k8s.io,…as=Table;v=v1beta1;…,application/json`).
 * v1beta1 Tables are not served (kube-apiserver stopped serving them in 1.22), so they are skipped.
 */
export function wantsTable(accept: string | undefined): boolean {
  if (!accept) return false;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim());
    const media = type.toLowerCase();
    const p = new Map(
      params.map((kv) => {
        const i = kv.indexOf('=');
        return i < 0 ? [kv.toLowerCase(), ''] : [kv.slice(0, i).trim().toLowerCase(), kv.slice(i + 1).trim()];
      }),
    );
    const as = p.get('as');
    if (as === undefined) {
      if (media === 'application/json' || media === '*/*' || media === 'application/*') return false;
      continue; // e.g. protobuf: not served, try the next one
    }
    if (media === 'application/json' && as === 'Table' && p.get('g') === 'meta.k8s.io' && p.get('v') === 'v1') return true;
  }
  return false;
}

/** `?includeObject=` (default Metadata), or the 400 Status kube-apiserver answers for another value. */
export function includeObjectPolicy(query: URLSearchParams): Parsed<IncludeObjectPolicy> {
  const v = query.get('includeObject');
  if (v === null || v === '') return { ok: true, value: 'Metadata' };
  if (v === 'None' || v === 'Metadata' || v === 'Object') return { ok: true, value: v };
  return { ok: false, status: errorStatus(400, `unrecognized includeObject value: "${v}"`) };
}

/** `PartialObjectMetadata` of `object` (its metadata only). */
export function partialObjectMetadata(object: Record<string, unknown>): Record<string, unknown> {
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata ?? {} };
}

/** The meta.k8s.io/v1 Table of `rows` (one object or a list's items). */
export function table(
  columns: readonly TableColumnDefinition[],
  rows: readonly PrintedRow[],
  resourceVersion: string,
  include: IncludeObjectPolicy,
): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: columns,
    rows: rows.map((r) => {
      const row: Record<string, unknown> = { cells: r.cells };
      if (include === 'Metadata') row.object = partialObjectMetadata(r.object);
      else if (include === 'Object') row.object = r.object;
      return row;
    }),
  };
}

/**
 * apimachinery's `duration.HumanDuration`: "45s", "3m20s", "12m", "5h3m", "36h", "3d4h", "40d",
 * "2y30d", "9y"; a timestamp a little in the future is "0s", one far ahead "<invalid>".
 */
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    const y = Math.trunc(hours / 24 / 365);
    return dy === 0 ? `${y}y` : `${y}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

/** printers.go `translateTimestampSince`: the age of an RFC 3339 timestamp, `<unknown>` without one. */
export function translateTimestampSince(timestamp: unknown, now = Date.now()): string {
  if (typeof timestamp !== 'string' || timestamp === '') return '<unknown>';
  const t = Date.parse(timestamp);
  return Number.isNaN(t) ? '<unknown>' : humanDuration(now - t);
}
