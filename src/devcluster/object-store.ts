/**
 * A namespaced store of plain API objects (the dev cluster's Services, EndpointSlices and Events):
 * what kube-apiserver's generic registry does for them without etcd. Objects are kept as their v1
 * JSON; the store fills in the server-set metadata (uid, resourceVersion, creationTimestamp, a
 * generated name) and shares the cluster's resourceVersion counter.
 */
import { createHash, randomUUID } from 'node:crypto';

type Json = Record<string, unknown>;

/** What identifies a store's resource in URLs, messages and objects. */
export interface StoredResource {
  /** Plural resource name (`services`). */
  resource: string;
  kind: string;
  /** `v1` or `group/version`. */
  apiVersion: string;
  /** The API group (`''` for core), for Status details. */
  group: string;
  /**
   * DELETE answers with the deleted object (Services) instead of a Success Status (the generic
   * registry's default).
   */
  returnDeletedObject: boolean;
  /** Keep at most this many objects (the oldest go first: events expire); default unlimited. */
  maxObjects?: number;
}

/** `metadata.creationTimestamp` format: RFC 3339 in whole seconds, as the apiserver writes it. */
export function rfc3339(date = new Date()): string {
  return date.toISOString().replace(/\.\d+Z$/, 'Z');
}

/** Objects of one resource, keyed by namespace and name. */
export class ObjectStore {
  readonly #objects = new Map<string, Json>();

  constructor(
    readonly info: StoredResource,
    /** The next resourceVersion of the cluster (shared with pods). */
    private readonly nextVersion: () => number,
  ) {}

  /** Objects (of one namespace, or all), sorted by namespace then name, without kind/apiVersion. */
  list(namespace?: string): Json[] {
    return [...this.#objects.values()]
      .filter((o) => namespace === undefined || meta(o).namespace === namespace)
      .sort((a, b) => String(meta(a).namespace).localeCompare(String(meta(b).namespace)) || String(meta(a).name).localeCompare(String(meta(b).name)))
      .map(({ kind: _k, apiVersion: _v, ...rest }) => rest);
  }

  /** One object with kind/apiVersion, if it exists. */
  get(namespace: string, name: string): Json | undefined {
    return this.#objects.get(`${namespace}/${name}`);
  }

  /**
   * Store a new object in `namespace` (its `metadata.name`, or `generateName` + 5 characters).
   * Returns it with kind/apiVersion and server-set metadata, or undefined when the name is taken.
   */
  create(namespace: string, object: Json): Json | undefined {
    const m = { ...meta(object) };
    let name = typeof m.name === 'string' ? m.name : '';
    if (name === '' && typeof m.generateName === 'string') {
      do name = `${m.generateName}${randomUUID().replace(/-/g, '').slice(0, 5)}`;
      while (this.get(namespace, name));
    }
    if (this.get(namespace, name)) return undefined;
    const stored: Json = {
      kind: this.info.kind,
      apiVersion: this.info.apiVersion,
      ...object,
      metadata: {
        ...m,
        name,
        namespace,
        uid: randomUUID(),
        resourceVersion: String(this.nextVersion()),
        creationTimestamp: rfc3339(),
      },
    };
    this.#objects.set(`${namespace}/${name}`, stored);
    const max = this.info.maxObjects;
    if (max !== undefined && this.#objects.size > max) this.#objects.delete(this.#objects.keys().next().value!);
    return stored;
  }

  /** Replace an existing object's fields (not its identity); returns the new version. */
  update(namespace: string, name: string, change: (o: Json) => Json): Json | undefined {
    const old = this.get(namespace, name);
    if (!old) return undefined;
    const next = change(old);
    const stored = { ...next, metadata: { ...meta(old), resourceVersion: String(this.nextVersion()) } };
    this.#objects.set(`${namespace}/${name}`, stored);
    return stored;
  }

  /** Remove an object; returns it, or undefined when it did not exist. */
  delete(namespace: string, name: string): Json | undefined {
    const o = this.get(namespace, name);
    if (o) this.#objects.delete(`${namespace}/${name}`);
    return o;
  }
}

/** The metadata of an object (an empty object when missing). */
export function meta(o: Json): Json {
  return typeof o.metadata === 'object' && o.metadata !== null ? (o.metadata as Json) : {};
}

/** A stable 5-character suffix for generated names (EndpointSlices of seeded Services). */
export function stableSuffix(seed: string): string {
  return createHash('sha256').update(seed).digest('hex').slice(0, 5);
}

/** The value at a dotted field path (`involvedObject.name`), as a selector compares it. */
export function fieldValue(o: Json, path: string): string {
  let cur: unknown = o;
  for (const key of path.split('.')) {
    if (typeof cur !== 'object' || cur === null) return '';
    cur = (cur as Json)[key];
  }
  return cur === undefined || cur === null ? '' : String(cur);
}
