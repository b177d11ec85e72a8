/**
 * A pod of the dev cluster: its identity, its containers (each with a main process) and its working
 * directory. Rendering it as a v1 Pod object lives in `pod-object.ts`.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { ContainerProcess, type ContainerSpec } from './container-process.js';

/** What is needed to create a pod. */
export interface PodInit {
  name: string;
  namespace: string;
  containers: ContainerSpec[];
  /** The pod's working directory (cwd and HOME of its processes). */
  workDir: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** An exec'd process of a pod: its container and its pid (undefined until it has started). */
export interface ExecProcess {
  container: string;
  readonly process: { readonly pid: number | undefined };
}

/**
 * One pod: metadata, containers, main processes and running exec sessions. Emits `exec-failed`
 * (container, command, message) when an exec could not start its command.
 */
export class Pod extends EventEmitter {
  readonly name: string;
  readonly namespace: string;
  readonly uid = randomUUID();
  readonly creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  readonly containers: readonly ContainerSpec[];
  readonly workDir: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  /** Set by the registry on every change. */
  resourceVersion = '0';
  /** Main process per container name. */
  readonly mains = new Map<string, ContainerProcess>();
  /** Aborts for the exec sessions running in this pod (fired when the pod is deleted). */
  readonly sessions = new Set<AbortController>();
  /** The exec'd processes running now, with their container (read by `resource-metrics.ts`). */
  readonly execs = new Set<ExecProcess>();
  #deleted = false;

  constructor(init: PodInit) {
    super();
    this.name = init.name;
    this.namespace = init.namespace;
    this.containers = init.containers;
    this.workDir = init.workDir;
    this.labels = init.labels ?? {};
    this.annotations = init.annotations ?? {};
    for (const spec of this.containers) {
      this.mains.set(spec.name, new ContainerProcess(spec, { podName: this.name, workDir: this.workDir }));
    }
  }

  /** True once the pod was deleted (or the cluster closed). */
  get deleted(): boolean {
    return this.#deleted;
  }

  /** The container spec called `name`, if any. */
  container(name: string): ContainerSpec | undefined {
    return this.containers.find((c) => c.name === name);
  }

  /** Start every container's main process. */
  start(): void {
    for (const main of this.mains.values()) main.start();
  }

  /** Kill the main processes and abort every exec session; resolves when the mains are gone. */
  async stop(): Promise<void> {
    this.#deleted = true;
    for (const session of this.sessions) session.abort(new Error(`pod "${this.name}" was deleted`));
    await Promise.all([...this.mains.values()].map((m) => m.stop()));
  }
}
