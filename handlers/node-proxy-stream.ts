/**
 * The kubelet's streaming endpoints through kube-apiserver's node proxy
 * (`/api/v1/nodes/NODE/proxy/{exec,attach,run,portForward,cri}/…`, `src/routing/request-path.ts`
 * `nodeProxyStreamOf`) run commands in any pod of the node, outside pods/exec: the catch-all relays
 * them byte for byte, so no tap can record them (`/run` is not even a stream: the command's output is
 * the answer's body). Where the session recording policy would record the session the path names,
 * the request is refused (403) with a Status naming the pods/… route that records it — whether the
 * matching rule enforces or fails open: fail-open trades the recording for availability when the
 * *sink* fails, not for a path the caller picks to go unrecorded, and pods/exec serves the same
 * session recorded. `/cri/…` and paths of no kubelet shape name no pod to decide on: refused whenever
 * a recording policy is configured. Review (`create nodes/proxy`) happens at authentication
 * (`streamReviewAttributes`).
 */
import type { IncomingMessage } from 'node:http';
import { authenticatedUserOf } from '../src/auth/request-auth.js';
import type { RecordingRequest } from '../src/recording/policy.js';
import type { SessionRecorder } from '../src/recording/session-recorder.js';
import { nodeProxyStreamOf, type NodeProxyStream } from '../src/routing/request-path.js';
import { errorStatus, type V1Status } from '../src/status.js';
import { clusterOf } from '../src/tunnel/cluster-path.js';

/** A refused node-proxy stream: the Status, and what to log (names only, never the command). */
export interface NodeProxyStreamRefusal {
  status: V1Status;
  log: { node: string; endpoint: string; namespace?: string; pod?: string; rule?: string };
}

/** The pods/… subresource the policy knows a kubelet endpoint as. */
function subresourceOf(stream: NodeProxyStream): RecordingRequest['subresource'] {
  if (stream.endpoint === 'attach') return 'attach';
  if (stream.endpoint === 'portforward') return 'portforward';
  return 'exec';
}

/** The rule that would record the session `stream` names (either tty: the kubelet reads it, not the proxy), or undefined. */
function recordingRule(req: IncomingMessage, recorder: Pick<SessionRecorder, 'decide'>, stream: NodeProxyStream): { rule: string } | undefined {
  const target = stream.target!;
  const user = authenticatedUserOf(req);
  const subresource = subresourceOf(stream);
  for (const tty of subresource === 'portforward' ? [false] : [false, true]) {
    const decision = recorder.decide({
      ...(user ? { user: user.username, groups: user.groups } : {}),
      cluster: clusterOf(req) ?? '',
      namespace: target.namespace,
      pod: target.pod,
      ...(target.container !== undefined ? { container: target.container } : {}),
      subresource,
      tty,
    });
    if (decision.record !== 'none') return { rule: decision.rule ?? '' };
  }
  return undefined;
}

/** The refusal of `req` when it is a node-proxy stream the recording policy would record; undefined otherwise. */
export function nodeProxyStreamRefusal(req: IncomingMessage, recorder: Pick<SessionRecorder, 'decide'> | undefined): NodeProxyStreamRefusal | undefined {
  if (!recorder) return undefined;
  const stream = nodeProxyStreamOf(req.url ?? '/');
  if (!stream) return undefined;
  const subresource = subresourceOf(stream);
  const route = `pods/${subresource}`;
  const log = { node: stream.node, endpoint: stream.endpoint, ...(stream.target ? { namespace: stream.target.namespace, pod: stream.target.pod } : {}) };
  if (!stream.target) {
    const message = `the kubelet's ${stream.endpoint} endpoint through nodes/proxy names no pod, and sessions here are recorded: use ${route} (/api/v1/namespaces/NAMESPACE/pods/NAME/${subresource}), which records them`;
    return { status: errorStatus(403, message, 'Forbidden', { name: stream.node, kind: 'nodes' }), log };
  }
  const matched = recordingRule(req, recorder, stream);
  if (!matched) return undefined;
  const { namespace, pod } = stream.target;
  // Names from the path are quoted (JSON), so no control character reaches a terminal printing the message.
  const message = `sessions of pod ${JSON.stringify(`${namespace}/${pod}`)} are recorded (rule ${JSON.stringify(matched.rule)}), and the kubelet's ${stream.endpoint} endpoint through nodes/proxy cannot be: use ${route} (/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/${subresource}), which records them`;
  return { status: errorStatus(403, message, 'Forbidden', { name: stream.node, kind: 'nodes' }), log: { ...log, rule: matched.rule } };
}
