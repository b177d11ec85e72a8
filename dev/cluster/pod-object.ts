/**
 * Rendering a dev-cluster {@link Pod} as a core/v1 Pod object, real enough for `kubectl get`,
 * `exec`, `attach`, `cp` and `port-forward` (phase Running, Ready conditions, container statuses).
 */
import { NODE_NAME } from './nodes.js';
import type { Pod } from './pod.js';

export { NODE_NAME };

/** An ISO timestamp in whole seconds (the apiserver's RFC 3339 form). */
function seconds(iso: string | undefined): string | undefined {
  return iso?.replace(/\.\d+Z$/, 'Z');
}

/** The v1 Pod JSON of `pod`; `withKind` adds kind/apiVersion (single objects and watch events). */
export function podObject(pod: Pod, withKind = true): Record<string, unknown> {
  const startTime = pod.creationTimestamp;
  const metadata: Record<string, unknown> = {
    name: pod.name,
    namespace: pod.namespace,
    uid: pod.uid,
    resourceVersion: pod.resourceVersion,
    creationTimestamp: pod.creationTimestamp,
  };
  if (Object.keys(pod.labels).length > 0) metadata.labels = pod.labels;
  if (Object.keys(pod.annotations).length > 0) metadata.annotations = pod.annotations;
  const allRunning = [...pod.mains.values()].every((m) => m.running);
  const condition = (type: string): Record<string, unknown> => ({
    type,
    status: allRunning || (type !== 'Ready' && type !== 'ContainersReady') ? 'True' : 'False',
    lastProbeTime: null,
    lastTransitionTime: startTime,
  });
  const obj: Record<string, unknown> = {
    metadata,
    spec: {
      containers: pod.containers.map((c) => {
        const spec: Record<string, unknown> = {
          name: c.name,
          image: c.image,
          resources: {},
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
          stdin: c.stdin,
          stdinOnce: c.stdinOnce,
          tty: c.tty,
        };
        if (c.command) spec.command = c.command;
        if (c.args) spec.args = c.args;
        return spec;
      }),
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      nodeName: NODE_NAME,
      schedulerName: 'default-scheduler',
      enableServiceLinks: true,
      priority: 0,
    },
    status: {
      phase: 'Running',
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: '127.0.0.1',
      podIPs: [{ ip: '127.0.0.1' }],
      startTime,
      containerStatuses: pod.containers.map((c) => {
        const main = pod.mains.get(c.name);
        const running = main?.running ?? false;
        const last = main?.lastTermination;
        const state = running
          ? { running: { startedAt: seconds(main?.startedAt) ?? startTime } }
          : { waiting: { reason: 'CrashLoopBackOff', message: `back-off restarting failed container=${c.name} pod=${pod.name}_${pod.namespace}(${pod.uid})` } };
        return {
          name: c.name,
          state,
          lastState: last
            ? { terminated: { exitCode: last.exitCode, reason: last.reason, startedAt: seconds(last.startedAt), finishedAt: seconds(last.finishedAt), containerID: `dev://${pod.uid}/${c.name}` } }
            : {},
          ready: running,
          restartCount: main?.restartCount ?? 0,
          image: c.image,
          imageID: `docker.io/library/${c.image}@sha256:${'0'.repeat(64)}`,
          containerID: `dev://${pod.uid}/${c.name}`,
          started: running,
        };
      }),
      qosClass: 'BestEffort',
    },
  };
  return withKind ? { kind: 'Pod', apiVersion: 'v1', ...obj } : obj;
}
