/**
 * Server-side printing (`meta.k8s.io/v1` `Table`), as kube-apiserver answers kubectl's
 * `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, …`: column definitions, one row per object
 * with its cells and (by default, `includeObject=Object`… kubectl asks for the metadata only) a
 * `PartialObjectMetadata`, and ages printed as apimachinery's `duration.HumanDuration` does.
 */

/** One column of a Table. */
export interface TableColumnDefinition {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  format: string;
  description: string;
  priority: number;
}

/** The `metav1.Table` media-type parameters a client asked for, or undefined for a plain object. */
export function wantsTable(accept: string | undefined): 'v1' | 'v1beta1' | undefined {
  for (const part of (accept ?? '').split(',')) {
    const params = new Map(
      part
        .split(';')
        .slice(1)
        .map((p) => p.trim().split('=').map((x) => x.trim()) as [string, string]),
    );
    if (params.get('as') === 'Table' && params.get('g') === 'meta.k8s.io') {
      const v = params.get('v');
      if (v === 'v1' || v === 'v1beta1') return v;
    }
  }
  return undefined;
}

/**
 * apimachinery's `duration.HumanDuration`: `45s`, `5m10s` under 10 minutes, `3h`/`3h5m`, `2d5h`,
 * `45d`, `2y30d`, `8y`.
 */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 60 * 2) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 60 * 3) return `${minutes}m`;
  const hours = Math.floor(seconds / 3600);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.floor(hours / 24) % 365;
    return dy === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${dy}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}

/** The `Name` column every kube-apiserver Table starts with. */
export const NAME_COLUMN: TableColumnDefinition = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names',
  priority: 0,
};

/** The `Age` column (the object's `creationTimestamp`). */
export const AGE_COLUMN: TableColumnDefinition = {
  name: 'Age',
  type: 'string',
  format: '',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata',
  priority: 0,
};

/** A `Table` of `objects` (each with `metadata`), one row each from `cells`. */
export function table(version: 'v1' | 'v1beta1', columns: readonly TableColumnDefinition[], objects: readonly { metadata: Record<string, unknown> }[], cells: (o: { metadata: Record<string, unknown> }) => unknown[]): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${version}`,
    metadata: { resourceVersion: '' },
    columnDefinitions: columns,
    rows: objects.map((o) => ({
      cells: cells(o),
      object: { kind: 'PartialObjectMetadata', apiVersion: `meta.k8s.io/${version}`, metadata: o.metadata },
    })),
  };
}
