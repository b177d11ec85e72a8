/**
 * Where kube-apiserver sends a pod streaming request on the kubelet (`pkg/registry/core/pod/strategy.go`:
 * `ExecLocation`, `AttachLocation`, `PortForwardLocation`): `/{exec,attach}/NS/POD/CONTAINER` with the
 * kubelet's own query names (`input`, `output`, `error`, `tty` set to `1`, one `command` line per argv
 * entry) and `/portForward/NS/POD` with the ports joined in one `port` value. The container defaults
 * to the pod's only one, as the apiserver chooses it. Pure: pod and query in, path or Status out.
 */
import type { PodInfo } from '../../api-client.js';
import { errorStatus, type V1Status } from '../../status.js';
import { parseRemoteCommandOptions } from '../../wire/remote-command-options.js';

/** The streaming subresources. */
export type KubeletStreamSubresource = 'exec' | 'attach' | 'portforward';

/** Either the kubelet request-target or the Status refusing the request. */
export type KubeletPath = { ok: true; path: string } | { ok: false; status: V1Status };

function badRequest(message: string): KubeletPath {
  return { ok: false, status: errorStatus(400, message, 'BadRequest') };
}

/** The container the request names, or the pod's only container (apiserver's defaulting). */
export function streamContainer(pod: PodInfo, podName: string, requested: string | null): { ok: true; container: string } | { ok: false; status: V1Status } {
  let container = requested ?? '';
  if (container === '') {
    if (pod.containers.length === 1) container = pod.containers[0]!;
    else {
      return { ok: false, status: errorStatus(400, `a container name must be specified for pod ${podName}, choose one of: [${pod.containers.join(' ')}]`, 'BadRequest') };
    }
  }
  if (!pod.containers.includes(container)) return { ok: false, status: errorStatus(400, `container ${container} is not valid for pod ${podName}`, 'BadRequest') };
  return { ok: true, container };
}

/** Port numbers of a port-forward query (`ports=8080&ports=9090` or `ports=8080,9090`). */
function portForwardPorts(query: URLSearchParams): { ok: true; ports: number[] } | { ok: false; status: V1Status } {
  const ports: number[] = [];
  for (const value of query.getAll('ports')) {
    for (const p of value.split(',')) {
      const t = p.trim();
      const n = Number(t);
      if (!/^\d+$/.test(t) || n < 1 || n > 65535) return { ok: false, status: errorStatus(400, `invalid port ${JSON.stringify(t)}: must be 1-65535`, 'BadRequest') };
      ports.push(n);
    }
  }
  return { ok: true, ports };
}

const enc = encodeURIComponent;

/** The kubelet request-target for a pod streaming request (`query` as the caller sent it). */
export function kubeletStreamPath(subresource: KubeletStreamSubresource, namespace: string, podName: string, pod: PodInfo, query: URLSearchParams): KubeletPath {
  if (pod.nodeName === undefined || pod.nodeName === '') return badRequest(`pod ${podName} does not have a host assigned`);
  const params = new URLSearchParams();
  if (subresource === 'portforward') {
    const ports = portForwardPorts(query);
    if (!ports.ok) return ports;
    if (ports.ports.length > 0) params.append('port', ports.ports.join(','));
    const q = params.toString();
    return { ok: true, path: `/portForward/${enc(namespace)}/${enc(podName)}${q ? `?${q}` : ''}` };
  }
  const container = streamContainer(pod, podName, query.get('container'));
  if (!container.ok) return container;
  const options = parseRemoteCommandOptions(query);
  if (!options.ok) return options;
  const o = options.value;
  if (o.stdin) params.append('input', '1');
  if (o.stdout) params.append('output', '1');
  if (o.stderr) params.append('error', '1');
  if (o.tty) params.append('tty', '1');
  if (subresource === 'exec') {
    const command = query.getAll('command');
    if (command.length === 0) return badRequest('you must specify a command');
    for (const c of command) params.append('command', c);
  }
  return { ok: true, path: `/${subresource}/${enc(namespace)}/${enc(podName)}/${enc(container.container)}?${params.toString()}` };
}
