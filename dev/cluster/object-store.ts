/**
 * A namespaced store of plain API objects (the dev cluster's Services, EndpointSlices and Events):
 * what kube-apiserver's generic registry does for them without etcd. Objects are kept as their v1
 * JSON; the store fills in the server-set metadata (uid, resourceVersion, creationTimestamp, a
 * generated name) and shares the cluster's resourceVersion counter.
 */
import { createHash, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';

type Json = Record<string, unknown>;

/** One change of a stored object, as a watch sends it. */
export interface StoreEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resourceVersion: number;
  /** The object at that version, with kind/apiVersion. */
  object: Json;
}

/** The cluster's one resourceVersion counter. */
export interface ResourceVersions {
  /** Take the next version (a change). */
  next(): number;
  /** The version of the last change. */
  current(): number;
}

/** Changes kept for watches that resume from an older resourceVersion. */
const HISTORY_LENGTH = 1000;

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

/** Objects of one resource, keyed by namespace and name. Emits `change` (StoreEvent). */
export class ObjectStore extends EventEmitter {
  readonly #objects = new Map<string, Json>();
  readonly #history: StoreEvent[] = [];
  #dropped = false;

  constructor(
    readonly info: StoredResource,
    /** The cluster's resourceVersion counter (shared with pods). */
    readonly versions: ResourceVersions,
  ) {
    super();
    this.setMaxListeners(0);
  }

  /** Changes after `resourceVersion`, or undefined when some of them are no longer kept (410). */
  changesSince(resourceVersion: number): StoreEvent[] | undefined {
    const first = this.#history[0];
    if (this.#dropped && first && resourceVersion < first.resourceVersion - 1) return undefined;
    return this.#history.filter((e) => e.resourceVersion > resourceVersion);
  }

  #record(type: StoreEvent['type'], object: Json, resourceVersion: number): void {
    const event: StoreEvent = { type, resourceVersion, object };
    this.#history.push(event);
    if (this.#history.length > HISTORY_LENGTH) {
      this.#history.shift();
      this.#dropped = true;
    }
    this.emit('change', event);
  }

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
        resourceVersion: String(this.versions.next()),
        creationTimestamp: rfc3339(),
      },
    };
    this.#objects.set(`${namespace}/${name}`, stored);
    this.#record('ADDED', stored, Number(meta(stored).resourceVersion));
    const max = this.info.maxObjects;
    if (max !== undefined && this.#objects.size > max) {
      const [oldest] = this.#objects.values();
      this.delete(String(meta(oldest!).namespace), String(meta(oldest!).name));
    }
    return stored;
  }

  /** Replace an existing object's fields (not its identity); returns the new version. */
  update(namespace: string, name: string, change: (o: Json) => Json): Json | undefined {
    const old = this.get(namespace, name);
    if (!old) return undefined;
    const next = change(old);
    const version = this.versions.next();
    const stored = { ...next, metadata: { ...meta(old), resourceVersion: String(version) } };
    this.#objects.set(`${namespace}/${name}`, stored);
    this.#record('MODIFIED', stored, version);
    return stored;
  }

  /** Remove an object; returns it, or undefined when it did not exist. */
  delete(namespace: string, name: string): Json | undefined {
    const o = this.get(namespace, name);
    if (!o) return undefined;
    this.#objects.delete(`${namespace}/${name}`);
    const version = this.versions.next();
    this.#record('DELETED', { ...o, metadata: { ...meta(o), resourceVersion: String(version) } }, version);
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
