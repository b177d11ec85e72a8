/**
 * The dev cluster's store: namespaces, pods and a resourceVersion counter, with watch events
 * (ADDED/MODIFIED/DELETED) kept in a short history so a watch can resume from a list's version.
 */
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerSpec } from './container-process.js';
import { Pod } from './pod.js';
import { podObject } from './pod-object.js';

/** One watch event, with the object already rendered as it was at that version. */
export interface PodEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  resourceVersion: number;
  pod: Pod;
  object: Record<string, unknown>;
}

/** Events kept for watches that resume from an older resourceVersion. */
const HISTORY_LENGTH = 1000;

/** The container of every default pod: `/bin/sh` reading commands from stdin, no tty. */
export function defaultContainer(name: string): ContainerSpec {
  return { name, image: 'busybox', stdin: true, stdinOnce: false, tty: false };
}

/** Namespaces and pods of the dev cluster. Emits `event` (PodEvent) on every change. */
export class PodRegistry extends EventEmitter {
  readonly namespaces = new Set(['default', 'kube-system', 'kube-public']);
  readonly #pods = new Map<string, Pod>();
  readonly #history: PodEvent[] = [];
  #version = 1;

  constructor(private readonly dataDir: string) {
    super();
    this.setMaxListeners(0);
  }

  /** The current resourceVersion (of the last change). */
  get resourceVersion(): number {
    return this.#version;
  }

  /** Take the next resourceVersion for an object that is not a pod (Services, Events…: one counter, as etcd's). */
  nextResourceVersion(): number {
    return ++this.#version;
  }

  /** The oldest resourceVersion a watch can resume after without missing events. */
  get oldestResumable(): number {
    return this.#history.length > 0 ? this.#history[0]!.resourceVersion - 1 : this.#version;
  }

  /** Pods, optionally of one namespace, sorted by namespace then name. */
  list(namespace?: string): Pod[] {
    return [...this.#pods.values()]
      .filter((p) => namespace === undefined || p.namespace === namespace)
      .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  }

  /** One pod, if it exists. */
  get(namespace: string, name: string): Pod | undefined {
    return this.#pods.get(`${namespace}/${name}`);
  }

  /** Events after `resourceVersion` that are still in the history. */
  eventsSince(resourceVersion: number): PodEvent[] {
    return this.#history.filter((e) => e.resourceVersion > resourceVersion);
  }

  /**
   * Create and start a pod (its working directory is `<dataDir>/<namespace>/<name>`). Throws if it
   * already exists; the caller maps that to 409.
   */
  create(init: {
    name: string;
    namespace?: string;
    containers?: ContainerSpec[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  }): Pod {
    const namespace = init.namespace ?? 'default';
    if (this.get(namespace, init.name)) throw new Error(`pods "${init.name}" already exists`);
    const workDir = join(this.dataDir, namespace, init.name);
    mkdirSync(workDir, { recursive: true });
    const pod = new Pod({
      name: init.name,
      namespace,
      containers: init.containers?.length ? init.containers : [defaultContainer(init.name)],
      workDir,
      labels: init.labels,
      annotations: init.annotations,
    });
    this.namespaces.add(namespace);
    this.#pods.set(`${namespace}/${init.name}`, pod);
    pod.start();
    // Listening after the start: a first start that fails at once is part of ADDED, not a change before it.
    for (const main of pod.mains.values()) {
      // Status changes, as the kubelet reports them: the exit (waiting/lastState) and the restart.
      const modified = (): void => {
        if (!pod.deleted) this.#record('MODIFIED', pod);
      };
      main.on('exit', modified);
      main.on('restart', modified);
    }
    this.#record('ADDED', pod);
    return pod;
  }

  /** Delete a pod: stop its processes and emit DELETED. Returns the pod, or undefined if missing. */
  delete(namespace: string, name: string): Pod | undefined {
    const pod = this.get(namespace, name);
    if (!pod) return undefined;
    this.#pods.delete(`${namespace}/${name}`);
    void pod.stop();
    this.#record('DELETED', pod);
    return pod;
  }

  /** Stop every pod's processes (the pods stay listed); resolves when all main processes are gone. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.#pods.values()].map((p) => p.stop()));
  }

  #record(type: PodEvent['type'], pod: Pod): void {
    this.#version++;
    pod.resourceVersion = String(this.#version);
    const event: PodEvent = { type, resourceVersion: this.#version, pod, object: podObject(pod) };
    this.#history.push(event);
    if (this.#history.length > HISTORY_LENGTH) this.#history.shift();
    this.emit('event', event);
  }
}
