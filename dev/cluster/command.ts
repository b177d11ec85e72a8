/**
 * `kube-stream-proxy dev-cluster`: the embedded development cluster on its own, for tests and demos
 * (flags, files read, the kubeconfig it writes, its shutdown).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseHostPort } from '../../src/listen-address.js';
import { installShutdown } from '../../src/process-shutdown.js';
import { writeKubeconfig } from '../kubeconfig.js';
import { clusterVersions, gitVersion, kubeletServesWebSockets } from './cluster-versions.js';
import { startDevCluster, type DevClusterOptions } from './dev-cluster.js';

export const DEV_CLUSTER_USAGE = `kube-stream-proxy dev-cluster: an embedded development cluster for tests and demos.

It answers like a small real cluster (discovery, namespaces, pods, node dev-node, services,
endpointslices, events, auth can-i; Table output for kubectl get; logs -f) and serves pods/exec,
pods/attach and pods/portforward as kube-apiserver and a kubelet of the versions it plays do (default
1.36 for both): SPDY/3.1 (v4, v3, v2, channel.k8s.io) and WebSocket (channel.k8s.io,
base64.channel.k8s.io, v4.channel.k8s.io, v4.base64.channel.k8s.io) everywhere; WebSocket
v5.channel.k8s.io and the port-forward tunnel SPDY/3.1+portforward.k8s.io served by a 1.36 kubelet
itself (its node declares ExtendWebSocketsToKubelet, the apiserver passes them through) or translated
by the apiserver for an older kubelet (1.30-1.35 apiserver behaviour). GET /metrics shows which way:
apiserver_websocket_streaming_requests_total{subresource,proxy_type}; the kubelet's
kubelet_websocket_streaming_requests_total{subresource} is on its /metrics and at
/api/v1/nodes/dev-node/proxy/metrics.

WARNING: exec and attach run REAL LOCAL PROCESSES as the current user (each pod's working directory
is its own folder), and port-forward connects to 127.0.0.1:<port> on this host. It listens on loopback
only unless --listen says otherwise; never expose it to a network you do not trust.

Usage:
  kube-stream-proxy dev-cluster [flags]

Flags:
  --listen HOST:PORT                    Address to listen on (default 127.0.0.1:6444; port 0 picks a free port).
  --pod NAME                            Add a pod in namespace "default" (repeatable; "demo" always exists).
  --data-dir DIR                        Folder holding each pod's working directory (default: a new temp folder).
  --kubeconfig PATH                     Write a kubeconfig for this cluster to PATH (with TLS, the serving
                                        certificate is its trust anchor; add a token yourself).
  --tls-cert-file PATH                  Serve the API over HTTPS with this PEM certificate (with the key).
  --tls-private-key-file PATH           PEM key of --tls-cert-file.
  --token-auth-file PATH                kube-apiserver's CSV token file (token,user,uid,"group1,group2").
                                        Turns anonymous access off: requests without a valid bearer token get 401.
  --authorization-policy-file PATH      JSON policy {"rules":[{users,groups,verbs,resources,namespaces,names}]}
                                        (needs --token-auth-file; without it every authenticated user may do anything).
  --kubelet-port PORT                   Kubelet listener port (default 10250; 0 picks a free port). The listener
                                        starts when the three kubelet files below are given.
  --kubelet-tls-cert-file PATH          PEM serving certificate of the kubelet listener.
  --kubelet-tls-private-key-file PATH   PEM key of --kubelet-tls-cert-file.
  --kubelet-client-ca-file PATH         PEM CA: the kubelet listener only accepts client certificates it issued.
  --apiserver-version VERSION           The kube-apiserver version played, 1.20 to 1.38 (default 1.36). Pod
                                        streaming WebSockets: up to 1.29 passed to the kubelet, 1.30 v5 translated
                                        here, 1.31-1.35 the port-forward tunnel too, from 1.36 passed to a kubelet
                                        that declares ExtendWebSocketsToKubelet (else as 1.35). Also GET /version.
  --kubelet-version VERSION             The kubelet version played (default: the apiserver's; never newer). From
                                        1.36 it serves WebSocket v5 and the tunnel itself and its node declares
                                        ExtendWebSocketsToKubelet; older (e.g. 1.35) speaks SPDY and WebSocket
                                        v1-v4 only and refuses v5 as a 1.35 kubelet does (403, empty body).
  --refuse-websocket-streaming          Answer WebSocket v5 and tunnel upgrades to pods with 403 and an empty body,
                                        before any 101 (as OpenShift does); SPDY and WebSocket v1-v4 still work.
  --refuse-spdy-streaming               Answer SPDY/3.1 upgrades to pods with 403 and text (a WebSocket-only
                                        gateway); WebSockets still work.
  -h, --help                            Show this help.
`;

/** What the `dev-cluster` flags ask for: `--help`, or the cluster options (files already read). */
export type DevClusterArgs =
  | { help: true }
  | { help: false; options: DevClusterOptions; kubeconfig?: string };

/**
 * Parse the `dev-cluster` flags into {@link DevClusterOptions}, reading the PEM files. Throws (an
 * Error naming the flag) on unknown flags, half-given TLS pairs or kubelet files, or a bad port.
 */
export function parseDevClusterArgs(argv: string[]): DevClusterArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      listen: { type: 'string', default: '127.0.0.1:6444' },
      pod: { type: 'string', multiple: true, default: [] },
      'data-dir': { type: 'string' },
      kubeconfig: { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-private-key-file': { type: 'string' },
      'token-auth-file': { type: 'string' },
      'authorization-policy-file': { type: 'string' },
      'kubelet-port': { type: 'string' },
      'kubelet-tls-cert-file': { type: 'string' },
      'kubelet-tls-private-key-file': { type: 'string' },
      'kubelet-client-ca-file': { type: 'string' },
      'apiserver-version': { type: 'string' },
      'kubelet-version': { type: 'string' },
      'refuse-websocket-streaming': { type: 'boolean', default: false },
      'refuse-spdy-streaming': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) return { help: true };
  const { host, port } = parseHostPort(values.listen);
  const options: DevClusterOptions = { host, port, pods: values.pod, dataDir: values['data-dir'] };
  if (values['apiserver-version'] !== undefined) options.apiserverVersion = values['apiserver-version'];
  if (values['kubelet-version'] !== undefined) options.kubeletVersion = values['kubelet-version'];
  // Checked here, so a bad version is a flag error (exit 2) naming the flag.
  clusterVersions(options.apiserverVersion, options.kubeletVersion, { apiserver: '--apiserver-version', kubelet: '--kubelet-version' });
  if (values['refuse-websocket-streaming']) options.refuseWebSocketStreaming = true;
  if (values['refuse-spdy-streaming']) options.refuseSpdyStreaming = true;

  const certFile = values['tls-cert-file'];
  const keyFile = values['tls-private-key-file'];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new Error('--tls-cert-file and --tls-private-key-file must be given together');
  }
  if (certFile !== undefined && keyFile !== undefined) options.tls = { cert: readFileSync(certFile), key: readFileSync(keyFile) };

  if (values['token-auth-file'] !== undefined) options.tokenAuthFile = resolve(values['token-auth-file']);
  if (values['authorization-policy-file'] !== undefined) {
    if (options.tokenAuthFile === undefined) throw new Error('--authorization-policy-file needs --token-auth-file');
    options.authorizationPolicyFile = resolve(values['authorization-policy-file']);
  }

  const kubeletFiles = {
    cert: values['kubelet-tls-cert-file'],
    key: values['kubelet-tls-private-key-file'],
    clientCa: values['kubelet-client-ca-file'],
  };
  const given = Object.values(kubeletFiles).filter((f) => f !== undefined).length;
  if (given > 0 || values['kubelet-port'] !== undefined) {
    if (given !== 3) {
      throw new Error('the kubelet listener needs --kubelet-tls-cert-file, --kubelet-tls-private-key-file and --kubelet-client-ca-file');
    }
    const portText = values['kubelet-port'] ?? '10250';
    if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) throw new Error(`--kubelet-port: not a port: ${JSON.stringify(portText)}`);
    options.kubelet = {
      port: Number(portText),
      tls: { cert: readFileSync(kubeletFiles.cert!), key: readFileSync(kubeletFiles.key!) },
      clientCa: readFileSync(kubeletFiles.clientCa!),
    };
  }
  return { help: false, options, kubeconfig: values.kubeconfig };
}

/** Run `dev-cluster` with its flags. */
export async function devClusterCommand(argv: string[]): Promise<number | void> {
  let args: DevClusterArgs;
  try {
    args = parseDevClusterArgs(argv);
  } catch (e) {
    process.stderr.write(`kube-stream-proxy dev-cluster: ${(e as Error).message}\n\n${DEV_CLUSTER_USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(DEV_CLUSTER_USAGE);
    return 0;
  }
  const cluster = await startDevCluster(args.options);
  if (args.kubeconfig) {
    writeKubeconfig(resolve(args.kubeconfig), {
      server: cluster.url,
      name: 'dev-cluster',
      caPem: args.options.tls?.cert.toString('utf8'),
    });
  }
  const { apiserver, kubelet } = cluster.versions;
  const streaming = kubeletServesWebSockets(kubelet) ? 'declares ExtendWebSocketsToKubelet' : 'SPDY and WebSocket v1-v4 only';
  process.stdout.write(`dev cluster listening on ${cluster.url} (runs local commands; kube-apiserver ${gitVersion(apiserver)}, kubelet ${gitVersion(kubelet)}: ${streaming})\n`);
  if (cluster.kubeletUrl) process.stdout.write(`dev cluster kubelet listening on ${cluster.kubeletUrl} (client certificates required)\n`);
  installShutdown(() => cluster.close());
}

