/**
 * The `kube-stream-proxy` command line: `serve`, `agent`, `login`, and the dev systems' `dev-cluster`,
 * `demo` and `dev-metrics` (dev/, loaded only by their own subcommands).
 *
 * Flags follow kube-apiserver's spelling (`--listen`, `--feature-gates`, …). Every subcommand prints
 * its own `--help`.
 */
import { parseArgs } from 'node:util';
import { DEFAULT_LISTEN, DEFAULT_SHUTDOWN_GRACE_PERIOD, DEFAULT_UPGRADE_RESPONSE_TIMEOUT, resolveConfig } from './config.js';
import { ConfigError } from './errors.js';
import { heapFloorLogFields } from './heap-floor.js';
import { loggerOptions, parseLogging, type Logging } from './log-format.js';
import { installShutdown } from './process-shutdown.js';
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
  login         kubectl exec credential plugin: log in to an OpenID Provider, print an ExecCredential.
  recorder      Store the session recordings proxy replicas stream to it; serve /sessions/ (docs/recording.md).
  sessions      List, play, export and verify recorded sessions (docs/recording.md).

Run 'kube-stream-proxy <command> --help' for a command's flags.
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
  --upstream-streaming auto|websocket|spdy  The protocol exec/attach/port-forward speak to an upstream
                                      apiserver, agent cluster or APIService backend (kubelets: their
                                      node's declaredFeatures decide). auto (default): the client's own
                                      first; refused before the 101 (not 401) -> the other one, translated
                                      here, remembered per upstream for 5m. websocket: never SPDY upstream
                                      (SPDY clients translated). spdy: never WebSocket v5 or the tunnel
                                      upstream (translated here, as before Kubernetes 1.36).
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

JWT / OIDC authentication (docs/security.md; --authn impersonate only):
  --authentication-config PATH        File with Authentication Configuration (apiserver.config.k8s.io/v1,
                                      v1beta1, v1alpha1) to configure the JWT Token authenticator,
                                      re-read when it changes. Mutually exclusive with the oidc-* flags.
  --oidc-issuer-url URL               The URL of the OpenID issuer, only HTTPS scheme will be accepted. If
                                      set, it will be used to verify the OIDC JSON Web Token (JWT).
  --oidc-client-id ID                 The client ID for the OpenID Connect client, must be set if
                                      oidc-issuer-url is set.
  --oidc-ca-file PATH                 If set, the OpenID server's certificate will be verified by one of the
                                      authorities in the oidc-ca-file, otherwise the host's root CA set is used.
  --oidc-username-claim CLAIM         The OpenID claim to use as the user name (default "sub"). Claims other
                                      than the default are not guaranteed to be unique and immutable.
  --oidc-username-prefix PREFIX       If provided, all usernames will be prefixed with this value. If not
                                      provided, username claims other than 'email' are prefixed by the issuer
                                      URL to avoid clashes. To skip any prefixing, provide the value '-'.
  --oidc-groups-claim CLAIM           If provided, the name of a custom OpenID Connect claim for specifying
                                      user groups (a string or an array of strings).
  --oidc-groups-prefix PREFIX         If provided, all groups will be prefixed with this value to prevent
                                      conflicts with other authentication strategies.
  --oidc-required-claim KEY=VALUE     A required claim in the ID Token, verified to be present with a matching
                                      value. Repeat this flag to specify multiple claims.
  --oidc-signing-algs A,B             Comma-separated list of allowed JOSE asymmetric signing algorithms:
                                      RS256, RS384, RS512, ES256, ES384, ES512, PS256, PS384, PS512 (default RS256).

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
  --feature-gates A=true,B=false      TranslateStreamCloseWebsocketRequests, PortForwardWebsockets,
                                      AuthorizePodWebsocketUpgradeCreatePermission, ExtendWebSocketsToKubelet
                                      (all default true).
  --upgrade-response-timeout DURATION Wait for the upstream's upgrade answer (default ${DEFAULT_UPGRADE_RESPONSE_TIMEOUT}).
  --request-timeout DURATION          Cut a request that is not long-running (watch, exec, attach, portforward,
                                      proxy, log) after this long with a 504 Timeout Status, as kube-apiserver's
                                      --request-timeout (default 0: none; the upstream's own applies).
  --shutdown-grace-period DURATION    On SIGTERM/SIGINT: stop accepting, fail /readyz, let streaming sessions
                                      run this long, then end them with a "proxy shutting down" Status
                                      (default ${DEFAULT_SHUTDOWN_GRACE_PERIOD}). A second signal exits at once.
  --logging-format text|json          Log lines for people (text, the default on a terminal) or JSON lines (the
                                      default elsewhere, e.g. in a pod); --log-format is the same flag.
  --log-level LEVEL                   trace, debug, info (default), warn, error, fatal or silent.
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
        'upstream-streaming': { type: 'string' },
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
        'request-timeout': { type: 'string' },
        'logging-format': { type: 'string' },
        'log-format': { type: 'string' },
        'log-level': { type: 'string' },
        'shutdown-grace-period': { type: 'string' },
        'apiservice-config': { type: 'string' },
        'proxy-client-cert-file': { type: 'string' },
        'proxy-client-key-file': { type: 'string' },
        'agent-listen': { type: 'string' },
        'agent-token-file': { type: 'string' },
        'agent-client-ca-file': { type: 'string' },
        'authentication-config': { type: 'string' },
        'oidc-issuer-url': { type: 'string' },
        'oidc-client-id': { type: 'string' },
        'oidc-ca-file': { type: 'string' },
        'oidc-username-claim': { type: 'string' },
        'oidc-username-prefix': { type: 'string' },
        'oidc-groups-claim': { type: 'string' },
        'oidc-groups-prefix': { type: 'string' },
        'oidc-required-claim': { type: 'string', multiple: true },
        'oidc-signing-algs': { type: 'string' },
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
      upstreamStreaming: values['upstream-streaming'],
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
      requestTimeout: values['request-timeout'],
      shutdownGracePeriod: values['shutdown-grace-period'],
      apiserviceConfig: values['apiservice-config'],
      proxyClientCertFile: values['proxy-client-cert-file'],
      proxyClientKeyFile: values['proxy-client-key-file'],
      agentListen: values['agent-listen'],
      agentTokenFile: values['agent-token-file'],
      agentClientCaFile: values['agent-client-ca-file'],
      authenticationConfig: values['authentication-config'],
      oidcIssuerUrl: values['oidc-issuer-url'],
      oidcClientId: values['oidc-client-id'],
      oidcCaFile: values['oidc-ca-file'],
      oidcUsernameClaim: values['oidc-username-claim'],
      oidcUsernamePrefix: values['oidc-username-prefix'],
      oidcGroupsClaim: values['oidc-groups-claim'],
      oidcGroupsPrefix: values['oidc-groups-prefix'],
      oidcRequiredClaim: values['oidc-required-claim'],
      oidcSigningAlgs: values['oidc-signing-algs'],
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
  let logging: Logging;
  try {
    logging = parseLogging({ format: values['logging-format'] ?? values['log-format'], level: values['log-level'] });
  } catch (e) {
    process.stderr.write(`kube-stream-proxy serve: ${(e as Error).message}\n`);
    return 2;
  }
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config, { logger: loggerOptions(logging) });
  } catch (e) {
    // The --authentication-config file is loaded again at start: it may have changed since the check.
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`kube-stream-proxy serve: ${e.message}\n`);
    return 2;
  }
  server.app.log.info(heapFloorLogFields(), 'heap floor');
  // Before the line: whoever reads it may send SIGTERM at once, and it must drain, not kill.
  installShutdown(async () => {
    await server.shutdown(config.shutdownGracePeriodMs);
  });
  process.stdout.write(
    `kube-stream-proxy listening on ${server.url}, upstream ${config.upstream?.url.origin ?? '(none)'}` +
      (server.agentUrl ? `, agents on ${server.agentUrl}` : '') +
      '\n',
  );
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
    // The dev systems (dev/) are loaded only by their own subcommands: src/ is the proxy alone.
    case 'dev-cluster':
      return (await import('../dev/cluster/command.js')).devClusterCommand(rest);
    case 'demo':
      return (await import('../dev/demo-command.js')).demoCommand(rest);
    case 'serve':
      return serveCommand(rest);
    case 'dev-metrics':
      return (await import('../dev/metrics/command.js')).devMetricsCommand(rest);
    case 'agent':
      return (await import('./tunnel/agent-command.js')).agentCommand(rest);
    case 'login':
      return (await import('./login/login-command.js')).loginCommand(rest);
    case 'recorder':
      return (await import('./recording/recorder-command.js')).recorderCommand(rest);
    case 'sessions':
      return (await import('./recording/sessions-command.js')).sessionsCommand(rest);
    default:
      process.stderr.write(`kube-stream-proxy: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

