/**
 * The `kube-stream-proxy` command line: `serve`, `dev-cluster` and `demo`.
 *
 * Flags follow kube-apiserver's spelling (`--listen`, `--feature-gates`, …). Every subcommand prints
 * its own `--help`.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { DEMO_MAX_CLUSTERS, parseDemoClusters, runDemo, type DemoOptions } from './demo.js';
import { startDevCluster, type DevClusterOptions } from './devcluster/dev-cluster.js';
import { writeKubeconfig } from './kubeconfig.js';
import { parseHostPort } from './listen-address.js';
import { DEFAULT_LISTEN, DEFAULT_SHUTDOWN_GRACE_PERIOD, DEFAULT_UPGRADE_RESPONSE_TIMEOUT, resolveConfig } from './config.js';
import { ConfigError } from './errors.js';
import { startServer } from './server.js';

const USAGE = `kube-stream-proxy: a Kubernetes API front proxy that serves exec, attach and port-forward
over WebSockets (v5.channel.k8s.io, SPDY/3.1+portforward.k8s.io) for upstreams that speak only SPDY.

Usage:
  kube-stream-proxy <command> [flags]

Commands:
  serve         Run the proxy in front of a kube-apiserver or kubelet.
  dev-cluster   Run the embedded development cluster. WARNING: it runs local commands.
  demo          Run the dev cluster and the proxy on loopback, write a kubeconfig, print a kubectl line.
  dev-metrics   Run a metrics.k8s.io extension API server over a (dev) cluster's kubelet resource metrics.
  agent         Run next to a cluster and carry the proxy's /clusters/NAME requests to it (docs/agent.md).
  recorder      Store the session recordings proxy replicas stream to it; serve /sessions/ (docs/recording.md).
  sessions      List, play, export and verify recorded sessions (docs/recording.md).

Run 'kube-stream-proxy <command> --help' for a command's flags.
`;

const DEV_CLUSTER_USAGE = `kube-stream-proxy dev-cluster: an embedded development cluster for tests and demos.

It answers like a small real cluster (discovery, namespaces, pods, node dev-node, services,
endpointslices, events, auth can-i; Table output for kubectl get; logs -f) and serves pods/exec,
pods/attach and pods/portforward exactly as a kubelet behind a pre-1.30 kube-apiserver does:
SPDY/3.1 (v4, v3, v2, channel.k8s.io) and WebSocket (channel.k8s.io, base64.channel.k8s.io,
v4.channel.k8s.io, v4.base64.channel.k8s.io), no v5.

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
  -h, --help                            Show this help.
`;

const DEMO_USAGE = `kube-stream-proxy demo: the dev cluster and the proxy in front of it, on loopback.

Starts the embedded dev cluster (a SPDY-only kubelet look-alike), starts the proxy with the dev
cluster as its upstream, writes a kubeconfig that points kubectl at the PROXY, and prints a line to try.

With --clusters N: N dev clusters behind agents instead (docs/agent.md). Cluster "one" has the pods
demo and alpha, "two" demo and beta, and so on; each gets an agent (in this process) that dials the
proxy's agent listener with its own token, and the kubeconfig gets one context per cluster
(server: <proxy>/clusters/NAME; the first is current). No direct upstream and no dev-metrics then.

WARNING: the dev clusters run real local processes as the current user.

Usage:
  kube-stream-proxy demo [flags]

Flags:
  --listen HOST:PORT              Proxy address (default 127.0.0.1:6443; loopback).
  --dev-cluster-listen HOST:PORT  Dev cluster address (default 127.0.0.1:0: a free port; with --clusters,
                                  port P gives P, P+1, ...).
  --clusters N                    N clusters (1-${DEMO_MAX_CLUSTERS}) behind agents, one kubeconfig context each.
  --agent-listen HOST:PORT        The proxy's agent listener with --clusters (default 127.0.0.1:0; loopback).
  --feature-gates A=true,B=false  Proxy feature gates (as for serve).
  --kubeconfig PATH               Where to write the kubeconfig (default ./.kube-stream-proxy/kubeconfig);
                                  with --clusters the agent tokens go to agents/ next to it.
  --shutdown-grace-period DURATION  As for serve (default ${DEFAULT_SHUTDOWN_GRACE_PERIOD}).
  -h, --help                      Show this help.
`;

const SERVE_USAGE = `kube-stream-proxy serve: the front proxy. pods/{exec,attach,portforward} upgrades are relayed to
the upstream byte for byte; everything else is reverse-proxied. /healthz, /livez, /readyz and /metrics
are served on the same listener.

Usage:
  kube-stream-proxy serve --upstream URL [flags]

Flags:
  --listen HOST:PORT                  Address to listen on (default ${DEFAULT_LISTEN}). Plain HTTP only on loopback.
  --tls-cert-file PATH                PEM certificate for HTTPS (with --tls-private-key-file).
  --tls-private-key-file PATH         PEM key for HTTPS.
  --upstream URL                      kube-apiserver/kubelet base URL (http or https).
  --upstream-ca-file PATH             PEM CA bundle to verify the upstream.
  --upstream-token-file PATH          The proxy's own bearer token (re-read every minute).
  --upstream-client-cert-file PATH    The proxy's own PEM client certificate (with the key).
  --upstream-client-key-file PATH     The proxy's own PEM client key.
  --kubeconfig PATH                   Take upstream server, trust and the proxy's credentials from a kubeconfig.
  --in-cluster                        Take them from the pod's service account.
  --upstream-insecure-skip-tls-verify Do not verify the upstream's certificate (logged as a warning).

Security (docs/security.md):
  --upstream-mode apiserver|kubelet   apiserver (default): everything goes to --upstream. kubelet: API
                                      requests still go there; exec/attach/portforward go straight to the
                                      pod's kubelet (pod -> node -> address via the API).
  --authn passthrough|impersonate     passthrough (default with apiserver): callers' Authorization and
                                      Impersonate-* go upstream unchanged, never the proxy's credentials.
                                      impersonate (required with kubelet): the proxy authenticates callers
                                      (TokenReview, --client-ca-file, --requestheader-*), authorizes pod
                                      streaming with SubjectAccessReview, and calls upstream as itself
                                      with Impersonate-User/Group/Extra-*.
  --client-ca-file PATH               CA for client certificates (CN = user, O = groups); needs HTTPS.
  --requestheader-client-ca-file PATH CA for front proxies allowed to assert X-Remote-User/Group/Extra-*.
  --requestheader-allowed-names A,B   Front-proxy certificate CommonNames allowed (default: any).
  --requestheader-username-headers H  Default X-Remote-User.
  --requestheader-group-headers H     Default X-Remote-Group.
  --requestheader-extra-headers-prefix P  Default X-Remote-Extra-.
  --kubelet-client-certificate PATH   The proxy's client certificate toward kubelets (kubelet mode).
  --kubelet-client-key PATH           Its key.
  --kubelet-certificate-authority PATH  CA verifying kubelet serving certificates (kubelet mode).
  --kubelet-preferred-address-types T Node address types in order (default Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP).
  --kubelet-insecure-skip-tls-verify  Do not verify kubelet certificates (logged as a warning).
  --websocket-allowed-origins O1,O2   Origins (scheme://host[:port]) whose pages may open WebSockets, or *
                                      (default *, as kube-apiserver). Others get 403 before any upstream
                                      work. With --client-ca-file, a cross-origin upgrade without a bearer
                                      token is refused unless its origin is listed explicitly.

Aggregation (docs/aggregation.md):
  --apiservice-config PATH            apiregistration.k8s.io/v1 APIService documents (YAML/JSON, a List too),
                                      re-read when the file changes. /apis/<group>/<version>/... of a
                                      non-local APIService goes to its backend: spec.service (resolved
                                      through EndpointSlices, TLS name <service>.<namespace>.svc) or the
                                      annotation kube-stream-proxy.io/backend-url: https://host:port.
  --proxy-client-cert-file PATH       Front-proxy client certificate presented to aggregated API servers.
  --proxy-client-key-file PATH        Its key.

Clusters behind agents (docs/agent.md):
  --agent-listen HOST:PORT            Accept agent tunnels here (TLS with the --tls-* pair; plain only on
                                      loopback), as a raw upgrade or over a WebSocket (agent wss://). Clients
                                      address a cluster as /clusters/NAME/...; --upstream becomes optional
                                      (requests without a cluster then get 404).
  --agent-token-file PATH             CSV token,cluster-name: which agent token serves which cluster
                                      (re-read when it changes).
  --agent-client-ca-file PATH         PEM CA bundle: the agent listener asks for a client certificate, and
                                      one verified by this CA authenticates its agent for the cluster named
                                      by its CN (no token needed; tokens still accepted). TLS listener only.

Session recording (docs/recording.md):
  --session-recording-config PATH     SessionRecordingConfiguration (kube-stream-proxy.io/v1alpha1): which
                                      exec/attach/portforward sessions are recorded, output or full, enforced
                                      or not; re-read when the file changes. Without it nothing is recorded.
  --session-recording-dir DIR         Write recordings to DIR (<id>.cast + <id>.json; 0700/0600), or:
  --session-recorder-url URL          stream them to a recorder (kube-stream-proxy recorder).
  --session-recorder-token-file PATH  Bearer token for the recorder (this replica's line of its --ingest-token-file).
  --session-recorder-ca-file PATH     CA bundle verifying the recorder.
  --session-recorder-client-cert-file PATH  Client certificate for the recorder (with the key).
  --session-recorder-client-key-file PATH   Its key.
  --session-recording-max-bytes N     Output bytes recorded per session (default 64 MiB; 0 = no limit); past it a
                                      marker, and the session goes on unrecorded.

Other:
  --max-connection-bytes-per-sec N    Per-direction limit on each upgraded connection (default 0 = unlimited).
  --feature-gates A=true,B=false      TranslateStreamCloseWebsocketRequests, PortForwardWebsockets (both default true).
  --upgrade-response-timeout DURATION Wait for the upstream's upgrade answer (default ${DEFAULT_UPGRADE_RESPONSE_TIMEOUT}).
  --shutdown-grace-period DURATION    On SIGTERM/SIGINT: stop accepting, fail /readyz, let streaming sessions
                                      run this long, then end them with a "proxy shutting down" Status
                                      (default ${DEFAULT_SHUTDOWN_GRACE_PERIOD}). A second signal exits at once.
  -h, --help                          Show this help.
`;

/** `serve`: validate the flags, start the proxy, run until SIGINT/SIGTERM. */
export async function serveCommand(argv: string[]): Promise<number | void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string' },
        'tls-cert-file': { type: 'string' },
        'tls-private-key-file': { type: 'string' },
        upstream: { type: 'string' },
        'upstream-ca-file': { type: 'string' },
        'upstream-token-file': { type: 'string' },
        'upstream-client-cert-file': { type: 'string' },
        'upstream-client-key-file': { type: 'string' },
        kubeconfig: { type: 'string' },
        'in-cluster': { type: 'boolean', default: false },
        'upstream-insecure-skip-tls-verify': { type: 'boolean', default: false },
        'upstream-mode': { type: 'string' },
        authn: { type: 'string' },
        'client-ca-file': { type: 'string' },
        'requestheader-client-ca-file': { type: 'string' },
        'requestheader-allowed-names': { type: 'string' },
        'requestheader-username-headers': { type: 'string' },
        'requestheader-group-headers': { type: 'string' },
        'requestheader-extra-headers-prefix': { type: 'string' },
        'kubelet-client-certificate': { type: 'string' },
        'kubelet-client-key': { type: 'string' },
        'kubelet-certificate-authority': { type: 'string' },
        'kubelet-preferred-address-types': { type: 'string' },
        'kubelet-insecure-skip-tls-verify': { type: 'boolean', default: false },
        'websocket-allowed-origins': { type: 'string' },
        'max-connection-bytes-per-sec': { type: 'string' },
        'feature-gates': { type: 'string' },
        'upgrade-response-timeout': { type: 'string' },
        'shutdown-grace-period': { type: 'string' },
        'apiservice-config': { type: 'string' },
        'proxy-client-cert-file': { type: 'string' },
        'proxy-client-key-file': { type: 'string' },
        'agent-listen': { type: 'string' },
        'agent-token-file': { type: 'string' },
        'agent-client-ca-file': { type: 'string' },
        'session-recording-config': { type: 'string' },
        'session-recording-dir': { type: 'string' },
        'session-recording-max-bytes': { type: 'string' },
        'session-recorder-url': { type: 'string' },
        'session-recorder-token-file': { type: 'string' },
        'session-recorder-ca-file': { type: 'string' },
        'session-recorder-client-cert-file': { type: 'string' },
        'session-recorder-client-key-file': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }));
  } catch (e) {
    process.stderr.write(`kube-stream-proxy serve: ${(e as Error).message}\n\n${SERVE_USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(SERVE_USAGE);
    return 0;
  }
  let config;
  try {
    config = await resolveConfig({
      listen: values.listen,
      tlsCertFile: values['tls-cert-file'],
      tlsPrivateKeyFile: values['tls-private-key-file'],
      upstream: values.upstream,
      upstreamCaFile: values['upstream-ca-file'],
      upstreamTokenFile: values['upstream-token-file'],
      upstreamClientCertFile: values['upstream-client-cert-file'],
      upstreamClientKeyFile: values['upstream-client-key-file'],
      kubeconfig: values.kubeconfig,
      inCluster: values['in-cluster'],
      upstreamInsecureSkipTlsVerify: values['upstream-insecure-skip-tls-verify'],
      upstreamMode: values['upstream-mode'],
      authn: values.authn,
      clientCaFile: values['client-ca-file'],
      requestheaderClientCaFile: values['requestheader-client-ca-file'],
      requestheaderAllowedNames: values['requestheader-allowed-names'],
      requestheaderUsernameHeaders: values['requestheader-username-headers'],
      requestheaderGroupHeaders: values['requestheader-group-headers'],
      requestheaderExtraHeadersPrefix: values['requestheader-extra-headers-prefix'],
      kubeletClientCertificate: values['kubelet-client-certificate'],
      kubeletClientKey: values['kubelet-client-key'],
      kubeletCertificateAuthority: values['kubelet-certificate-authority'],
      kubeletPreferredAddressTypes: values['kubelet-preferred-address-types'],
      kubeletInsecureSkipTlsVerify: values['kubelet-insecure-skip-tls-verify'],
      websocketAllowedOrigins: values['websocket-allowed-origins'],
      maxConnectionBytesPerSec: values['max-connection-bytes-per-sec'],
      featureGates: values['feature-gates'],
      upgradeResponseTimeout: values['upgrade-response-timeout'],
      shutdownGracePeriod: values['shutdown-grace-period'],
      apiserviceConfig: values['apiservice-config'],
      proxyClientCertFile: values['proxy-client-cert-file'],
      proxyClientKeyFile: values['proxy-client-key-file'],
      agentListen: values['agent-listen'],
      agentTokenFile: values['agent-token-file'],
      agentClientCaFile: values['agent-client-ca-file'],
      sessionRecordingConfig: values['session-recording-config'],
      sessionRecordingDir: values['session-recording-dir'],
      sessionRecordingMaxBytes: values['session-recording-max-bytes'],
      sessionRecorderUrl: values['session-recorder-url'],
      sessionRecorderTokenFile: values['session-recorder-token-file'],
      sessionRecorderCaFile: values['session-recorder-ca-file'],
      sessionRecorderClientCertFile: values['session-recorder-client-cert-file'],
      sessionRecorderClientKeyFile: values['session-recorder-client-key-file'],
    });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`kube-stream-proxy serve: ${e.message}\n`);
    return 2;
  }
  const server = await startServer(config, { logger: { level: 'info' } });
  process.stdout.write(
    `kube-stream-proxy listening on ${server.url}, upstream ${config.upstream?.url.origin ?? '(none)'}` +
      (server.agentUrl ? `, agents on ${server.agentUrl}` : '') +
      '\n',
  );
  installShutdown(async () => {
    await server.shutdown(config.shutdownGracePeriodMs);
  });
}

/** Run the CLI; resolves with the exit code, or never for long-running servers. */
export async function main(argv: string[]): Promise<number | void> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return 0;
    case 'dev-cluster':
      return devClusterCommand(rest);
    case 'demo':
      return demoCommand(rest);
    case 'serve':
      return serveCommand(rest);
    case 'dev-metrics':
      return (await import('./devmetrics/command.js')).devMetricsCommand(rest);
    case 'agent':
      return (await import('./tunnel/agent-command.js')).agentCommand(rest);
    case 'recorder':
      return (await import('./recording/recorder-command.js')).recorderCommand(rest);
    case 'sessions':
      return (await import('./recording/sessions-command.js')).sessionsCommand(rest);
    default:
      process.stderr.write(`kube-stream-proxy: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

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
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) return { help: true };
  const { host, port } = parseHostPort(values.listen);
  const options: DevClusterOptions = { host, port, pods: values.pod, dataDir: values['data-dir'] };

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

async function devClusterCommand(argv: string[]): Promise<number | void> {
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
  process.stdout.write(`dev cluster listening on ${cluster.url} (runs local commands)\n`);
  if (cluster.kubeletUrl) process.stdout.write(`dev cluster kubelet listening on ${cluster.kubeletUrl} (client certificates required)\n`);
  installShutdown(() => cluster.close());
}

async function demoCommand(argv: string[]): Promise<number | void> {
  let options: DemoOptions;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string', default: '127.0.0.1:6443' },
        'dev-cluster-listen': { type: 'string', default: '127.0.0.1:0' },
        'feature-gates': { type: 'string' },
        'shutdown-grace-period': { type: 'string' },
        kubeconfig: { type: 'string', default: '.kube-stream-proxy/kubeconfig' },
        clusters: { type: 'string' },
        'agent-listen': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(DEMO_USAGE);
      return 0;
    }
    options = {
      listen: values.listen,
      devClusterListen: values['dev-cluster-listen'],
      kubeconfig: resolve(values.kubeconfig),
      ...(values['feature-gates'] !== undefined ? { featureGates: values['feature-gates'] } : {}),
      ...(values['shutdown-grace-period'] !== undefined ? { shutdownGracePeriod: values['shutdown-grace-period'] } : {}),
      ...(values.clusters !== undefined ? { clusters: parseDemoClusters(values.clusters) } : {}),
      ...(values['agent-listen'] !== undefined ? { agentListen: values['agent-listen'] } : {}),
    };
  } catch (e) {
    process.stderr.write(`kube-stream-proxy demo: ${(e as Error).message}\n\n${DEMO_USAGE}`);
    return 2;
  }
  let demo;
  try {
    demo = await runDemo(options);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`kube-stream-proxy demo: ${e.message}\n`);
    return 2;
  }
  // Before the banner: whoever reads it may send SIGTERM at once (tests do).
  installShutdown(() => demo.shutdown());
  process.stdout.write(demo.banner);
}

/**
 * SIGTERM/SIGINT run `close` (the graceful shutdown) and exit 0 when it is done; a second signal
 * exits 1 at once, for an operator who does not want to wait.
 */
function installShutdown(close: () => Promise<void>): void {
  let closing = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (closing) {
      process.stderr.write(`kube-stream-proxy: ${signal} again, exiting without waiting\n`);
      process.exit(1);
    }
    closing = true;
    process.stderr.write(`kube-stream-proxy: ${signal}, shutting down\n`);
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
