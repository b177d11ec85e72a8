/**
 * core/v1 Events of the dev cluster, as the scheduler and the kubelet record them for a pod:
 * `Scheduled`, then `Pulled`, `Created`, `Started` for each container (again on every restart,
 * counted on the same Event as client-go's event correlator does), and a `Warning` `Failed` Event
 * when an exec cannot start its command (e.g. a missing executable).
 */
import { NODE_NAME } from './nodes.js';
import { rfc3339, type ObjectStore, type StoredResource } from './object-store.js';
import type { Pod } from './pod.js';
import type { PodEvent, PodRegistry } from './pod-registry.js';

type Json = Record<string, unknown>;

/** The Events store's identity; old events are dropped past 1000 (kube-apiserver expires them after 1 h). */
export const EVENTS: StoredResource = { resource: 'events', kind: 'Event', apiVersion: 'v1', group: '', returnDeletedObject: false, maxObjects: 1000 };

/** One thing that happened to a pod. */
export interface PodEventNote {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  /** The container it is about (`spec.containers{name}`), if any. */
  container?: string;
  /** Who reports it (default the kubelet on dev-node). */
  component?: 'kubelet' | 'default-scheduler';
}

/** Records Events for pods into the events store, aggregating repeats into `count`. */
export class EventRecorder {
  /** Aggregation key → event name. */
  readonly #names = new Map<string, string>();
  /** The last nanosecond timestamp used in a name (kept increasing, so names sort by time). */
  #lastNanos = 0n;

  constructor(private readonly store: ObjectStore) {}

  /** Record `note` about `pod`. */
  record(pod: Pod, note: PodEventNote): void {
    const component = note.component ?? 'kubelet';
    const fieldPath = note.container ? `spec.containers{${note.container}}` : undefined;
    const key = [pod.namespace, pod.uid, fieldPath ?? '', component, note.type, note.reason, note.message].join('\0');
    const now = rfc3339();
    const known = this.#names.get(key);
    if (known && this.store.update(pod.namespace, known, (e) => ({ ...e, count: (typeof e.count === 'number' ? e.count : 1) + 1, lastTimestamp: now }))) {
      return;
    }
    const involvedObject: Json = { kind: 'Pod', namespace: pod.namespace, name: pod.name, uid: pod.uid, apiVersion: 'v1', resourceVersion: pod.resourceVersion };
    if (fieldPath) involvedObject.fieldPath = fieldPath;
    const source: Json = component === 'kubelet' ? { component, host: NODE_NAME } : { component };
    const event = this.store.create(pod.namespace, {
      metadata: { name: `${pod.name}.${this.#nanos().toString(16)}` },
      involvedObject,
      reason: note.reason,
      message: note.message,
      source,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      type: note.type,
      eventTime: null,
      reportingComponent: component,
      reportingInstance: component === 'kubelet' ? NODE_NAME : '',
    });
    if (event) this.#names.set(key, String((event.metadata as Json).name));
  }

  /** client-go names an Event `<object>.<UnixNano in hex>`; this keeps them unique and increasing. */
  #nanos(): bigint {
    const now = BigInt(Date.now()) * 1_000_000n;
    this.#lastNanos = now > this.#lastNanos ? now : this.#lastNanos + 1n;
    return this.#lastNanos;
  }

  /** The events of a pod's start: scheduled, then image, create and start of each container. */
  podStarted(pod: Pod): void {
    this.record(pod, {
      type: 'Normal',
      reason: 'Scheduled',
      message: `Successfully assigned ${pod.namespace}/${pod.name} to ${NODE_NAME}`,
      component: 'default-scheduler',
    });
    for (const c of pod.containers) this.containerStarted(pod, c.name);
  }

  /** A container (re)started: Pulled, Created, Started (kubelet 1.28 wording). */
  containerStarted(pod: Pod, container: string): void {
    const image = pod.container(container)?.image ?? '';
    this.record(pod, { type: 'Normal', reason: 'Pulled', message: `Container image "${image}" already present on machine`, container });
    this.record(pod, { type: 'Normal', reason: 'Created', message: `Created container ${container}`, container });
    this.record(pod, { type: 'Normal', reason: 'Started', message: `Started container ${container}`, container });
  }

  /** An exec could not start `command` in `container`. */
  execFailed(pod: Pod, container: string, command: readonly string[], message: string): void {
    this.record(pod, { type: 'Warning', reason: 'Failed', message: `Exec of ${JSON.stringify(command)} failed: ${message}`, container });
  }

  /** Record the events of every pod `registry` creates from now on (start, restarts, failed execs). */
  follow(registry: PodRegistry): void {
    registry.on('event', (e: PodEvent) => {
      if (e.type !== 'ADDED') return;
      const pod = e.pod;
      this.podStarted(pod);
      for (const [name, main] of pod.mains) {
        main.on('restart', () => {
          if (pod.deleted) return;
          if (main.running) this.containerStarted(pod, name);
          else {
            this.record(pod, {
              type: 'Warning',
              reason: 'BackOff',
              message: `Back-off restarting failed container ${name} in pod ${pod.name}_${pod.namespace}(${pod.uid})`,
              container: name,
            });
          }
        });
      }
      pod.on('exec-failed', (container: string, command: string[], message: string) => this.execFailed(pod, container, command, message));
    });
  }
}
