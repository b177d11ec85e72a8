/**
 * `kube-stream-proxy agent`: the flags, validated once, and the long-running agent. The apiserver
 * and the agent's own credentials come as `serve` takes them (`--upstream` with `--upstream-ca-file`
 * and the token / client-certificate file flags, `--kubeconfig`, or `--in-cluster`: the same code,
 * `parseUpstream` of `src/config.ts`). `--access-as` says whose credentials the apiserver sees:
 * the caller's (passthrough: the agent adds none) or the agent's own plus the proxy's
 * `Impersonate-*` (impersonate).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { formatAgentLine, LOG_LEVELS, parseLogging, type Logging } from '../log-format.js';
import { isLoopbackHost, parseGoDuration, parseUpstream } from '../config.js';
import { ConfigError } from '../errors.js';
import { heapFloorLogFields } from '../heap-floor.js';
import type { AgentLogger } from './agent.js';
import { AgentPool, DEFAULT_PROXY_RESOLVE_INTERVAL_MS, type AgentPoolOptions } from './agent-pool.js';
import type { AccessAs } from './agent-request.js';
import { AGENT_CONNECT_PATH, isValidClusterName } from './protocol.js';

/** The `agent --help` text. */
export const AGENT_USAGE = `kube-stream-proxy agent: runs next to a cluster's apiserver, dials OUT to the proxy's agent
listener (serve --agent-listen) and carries the proxy's requests for /clusters/NAME/... to the
apiserver, streams (exec, attach, cp, port-forward) included. It serves one request per tunnel
stream, only inside the Kubernetes API (/api, /apis, /version, /openapi/..., /healthz, /livez,
/readyz; anything else gets 403), and checks for the apiserver's 101 before relaying an upgrade's
raw bytes. See docs/agent.md.

Usage:
  kube-stream-proxy agent --proxy-url URL --cluster-name NAME (--token-file PATH | --client-cert-file PATH --client-key-file PATH)
                          (--upstream URL | --kubeconfig PATH | --in-cluster) [flags]

Flags:
  --proxy-url URL                     The proxy's agent listener: https://HOST:PORT (http:// only on loopback),
                                      or wss://HOST:PORT (ws:// only on loopback) to carry the tunnel over a
                                      WebSocket, for L7 load balancers that pass WebSockets only.
                                      Repeatable: one tunnel to each. A HOST that is a DNS name (a headless
                                      Service) gets one tunnel per address it resolves to, re-resolved every
                                      --proxy-resolve-interval; the TLS server name stays the DNS name.
  --proxy-resolve-interval DURATION   How often DNS names of --proxy-url are re-resolved (default ${DEFAULT_PROXY_RESOLVE_INTERVAL_MS / 1000}s).
  --proxy-ca-file PATH                PEM CA verifying the proxy's serving certificate (default: system roots).
  --cluster-name NAME                 The cluster this agent serves (DNS-1123 name; clients use /clusters/NAME).
  --token-file PATH                   The agent token (a line of the proxy's --agent-token-file); re-read on every connect.
  --access-as MODE                    passthrough (default): the caller's own credentials reach the apiserver, the
                                      agent adds none. impersonate: the agent removes the caller's Authorization and
                                      sends its own credentials with the proxy's Impersonate-* headers; the proxy
                                      must run --authn=impersonate (a mismatch is refused at connect). The agent's
                                      identity needs RBAC: impersonate users/groups/serviceaccounts/userextras/uids,
                                      and create tokenreviews and subjectaccessreviews.
  --upstream URL                      The cluster's apiserver (http or https); with --kubeconfig/--in-cluster it
                                      overrides the server.
  --client-cert-file PATH             PEM client certificate presented to the proxy (its CN is the cluster name;
                                      verified by the proxy's --agent-client-ca-file); re-read on every connect.
                                      With it, --token-file is optional.
  --client-key-file PATH              Its private key.
  --upstream URL                      The cluster's apiserver (http or https).
  --upstream-ca-file PATH             PEM CA bundle to verify the apiserver.
  --upstream-token-file PATH          The agent's bearer token (impersonate only), re-read every minute.
  --upstream-client-cert-file PATH    The agent's client certificate (impersonate only), with
  --upstream-client-key-file PATH     its key.
  --upstream-insecure-skip-tls-verify Do not verify the apiserver's certificate (logged as a warning).
  --kubeconfig PATH                   The apiserver and the agent's credentials from a kubeconfig (current context).
  --in-cluster                        The apiserver and the agent's service account from the pod: KUBERNETES_SERVICE_HOST/PORT,
                                      the service-account CA, and its token (re-read: projected tokens rotate).
  --logging-format text|json          Log lines on stderr for people (the default on a terminal) or JSON lines
                                      (elsewhere); --log-format is the same flag.
  --log-level LEVEL                   trace, debug, info (default), warn, error, fatal or silent.
  -h, --help                          Show this help.
`;

/** One `--proxy-url`: https or wss (http/ws to a loopback address only). Throws ConfigError. */
function parseProxyUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`--proxy-url: invalid URL ${JSON.stringify(raw)}`);
  }
  if (!['https:', 'wss:', 'http:', 'ws:'].includes(url.protocol)) {
    throw new ConfigError(`--proxy-url ${raw}: scheme must be https or wss (http or ws on loopback)`);
  }
  if ((url.protocol === 'http:' || url.protocol === 'ws:') && !isLoopbackHost(url.hostname.replace(/^\[(.*)\]$/, '$1'))) {
    throw new ConfigError(`--proxy-url ${raw}: plain ${url.protocol.slice(0, -1)} is allowed only to a loopback address; the agent token must not cross a network in clear text`);
  }
  if (url.pathname !== '/' || url.search !== '' || url.username !== '') {
    throw new ConfigError(`--proxy-url ${raw}: give scheme://host:port only (the agent always connects to ${AGENT_CONNECT_PATH})`);
  }
  return url;
}

/** Parse the `agent` flags into the agent's options (files read). Throws ConfigError naming the flag. */
export async function parseAgentArgs(argv: string[], log: AgentLogger): Promise<{ help: true } | { help: false; options: AgentPoolOptions }> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        'proxy-url': { type: 'string', multiple: true },
        'proxy-resolve-interval': { type: 'string' },
        'proxy-ca-file': { type: 'string' },
        'cluster-name': { type: 'string' },
        'token-file': { type: 'string' },
        'access-as': { type: 'string' },
        'client-cert-file': { type: 'string' },
        'client-key-file': { type: 'string' },
        upstream: { type: 'string' },
        'upstream-ca-file': { type: 'string' },
        'upstream-token-file': { type: 'string' },
        'upstream-client-cert-file': { type: 'string' },
        'upstream-client-key-file': { type: 'string' },
        'upstream-insecure-skip-tls-verify': { type: 'boolean', default: false },
        kubeconfig: { type: 'string' },
        'in-cluster': { type: 'boolean', default: false },
        'logging-format': { type: 'string' },
        'log-format': { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }));
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  if (values.help) return { help: true };
  const need = (flag: string, v: string | undefined): string => {
    if (v === undefined || v === '') throw new ConfigError(`${flag} is required`);
    return v;
  };
  const rawUrls = values['proxy-url'] ?? [];
  if (rawUrls.length === 0) throw new ConfigError('--proxy-url is required');
  const proxyUrls = rawUrls.map(parseProxyUrl);
  const dup = proxyUrls.find((u, i) => proxyUrls.findIndex((v) => v.href === u.href) !== i);
  if (dup) throw new ConfigError(`--proxy-url ${dup.href} is given twice`);
  let resolveIntervalMs = DEFAULT_PROXY_RESOLVE_INTERVAL_MS;
  if (values['proxy-resolve-interval'] !== undefined) {
    try {
      resolveIntervalMs = parseGoDuration(values['proxy-resolve-interval']);
    } catch (e) {
      throw new ConfigError(`--proxy-resolve-interval: ${(e as Error).message}`);
    }
    if (!(resolveIntervalMs >= 1000)) throw new ConfigError(`--proxy-resolve-interval: ${values['proxy-resolve-interval']}: want at least 1s`);
  }
  const clusterName = need('--cluster-name', values['cluster-name']);
  if (!isValidClusterName(clusterName)) throw new ConfigError(`--cluster-name: ${JSON.stringify(clusterName)} is not a DNS-1123 subdomain`);
  const certFile = values['client-cert-file'];
  const keyFile = values['client-key-file'];
  if ((certFile === undefined) !== (keyFile === undefined)) throw new ConfigError('--client-cert-file and --client-key-file go together');
  if (certFile !== undefined) {
    const plain = proxyUrls.find((u) => u.protocol === 'http:' || u.protocol === 'ws:');
    if (plain) throw new ConfigError(`--client-cert-file: the proxy URL ${plain.href} is not TLS, so no certificate would be presented; use https:// or wss://`);
    for (const [flag, path] of [['--client-cert-file', certFile], ['--client-key-file', keyFile!]] as const) {
      try {
        readFileSync(path);
      } catch (e) {
        throw new ConfigError(`${flag}: ${(e as Error).message}`);
      }
    }
  }
  const tokenFile = values['token-file'];
  if (tokenFile === undefined && certFile === undefined) throw new ConfigError('--token-file (or --client-cert-file and --client-key-file) is required');
  if (tokenFile !== undefined) {
    try {
      if (readFileSync(tokenFile, 'utf8').trim() === '') throw new Error('empty');
    } catch (e) {
      throw new ConfigError(`--token-file: ${tokenFile}: ${(e as Error).message}`);
    }
  }
  const accessAs = (values['access-as'] ?? 'passthrough') as AccessAs;
  if (accessAs !== 'passthrough' && accessAs !== 'impersonate') throw new ConfigError(`--access-as: want passthrough or impersonate, got ${JSON.stringify(values['access-as'])}`);
  const credentialFlags = [values['upstream-token-file'], values['upstream-client-cert-file'], values['upstream-client-key-file']];
  const fromKubeConfig = values.kubeconfig !== undefined || values['in-cluster'];
  if (accessAs === 'passthrough' && credentialFlags.some((f) => f !== undefined)) {
    throw new ConfigError('--upstream-token-file and --upstream-client-*-file need --access-as impersonate: in passthrough the agent adds no credentials of its own');
  }
  if (accessAs === 'impersonate' && !fromKubeConfig && credentialFlags.every((f) => f === undefined)) {
    throw new ConfigError('--access-as impersonate needs the agent\'s own credentials: --upstream-token-file, --upstream-client-cert-file/--upstream-client-key-file, --kubeconfig or --in-cluster');
  }
  if (values.upstream === undefined && !fromKubeConfig) throw new ConfigError('--upstream URL (or --kubeconfig / --in-cluster) is required');
  // The agent's own identity (client certificate) goes on its apiserver connections only when it
  // acts with it: impersonate. In passthrough a kubeconfig gives the server and the CA only.
  const { upstream } = await parseUpstream(
    {
      ...(values.upstream !== undefined ? { upstream: values.upstream } : {}),
      ...(values['upstream-ca-file'] !== undefined ? { upstreamCaFile: values['upstream-ca-file'] } : {}),
      ...(values['upstream-token-file'] !== undefined ? { upstreamTokenFile: values['upstream-token-file'] } : {}),
      ...(values['upstream-client-cert-file'] !== undefined ? { upstreamClientCertFile: values['upstream-client-cert-file'] } : {}),
      ...(values['upstream-client-key-file'] !== undefined ? { upstreamClientKeyFile: values['upstream-client-key-file'] } : {}),
      ...(values.kubeconfig !== undefined ? { kubeconfig: values.kubeconfig } : {}),
      ...(values['in-cluster'] ? { inCluster: true } : {}),
      upstreamInsecureSkipTlsVerify: values['upstream-insecure-skip-tls-verify'],
    },
    accessAs === 'impersonate',
  );
  if (!upstream) throw new ConfigError('--upstream URL (or --kubeconfig / --in-cluster) is required');
  if (values['upstream-insecure-skip-tls-verify'] || (upstream.tls && !upstream.tls.rejectUnauthorized)) {
    log.warn({}, 'the apiserver serving certificate is NOT verified (--upstream-insecure-skip-tls-verify or kubeconfig insecure-skip-tls-verify)');
  }
  const options: AgentPoolOptions = {
    proxyUrls,
    resolveIntervalMs,
    clusterName,
    ...(tokenFile !== undefined ? { tokenFile } : {}),
    ...(certFile !== undefined ? { clientCertFile: certFile, clientKeyFile: keyFile! } : {}),
    upstream,
    accessAs,
    log,
  };
  if (values['proxy-ca-file'] !== undefined) {
    try {
      options.proxyCa = readFileSync(values['proxy-ca-file']);
    } catch (e) {
      throw new ConfigError(`--proxy-ca-file: ${(e as Error).message}`);
    }
  }
  return { help: false, options };
}

/**
 * The agent's logger on stderr: JSON lines (the serve command's shape: level, time, msg, fields), or
 * human lines on a terminal (`--logging-format`, src/log-format.ts), from `--log-level` up.
 */
export function stderrLogger(logging: Logging = parseLogging({}, process.stderr)): AgentLogger {
  const threshold = LOG_LEVELS.indexOf(logging.level);
  const line = (level: 30 | 40, obj: object, msg: string): void => {
    if ((level === 30 ? LOG_LEVELS.indexOf('info') : LOG_LEVELS.indexOf('warn')) < threshold) return;
    process.stderr.write(formatAgentLine(logging, level, obj, msg));
  };
  return { info: (obj, msg) => line(30, obj, msg), warn: (obj, msg) => line(40, obj, msg) };
}

/** `--logging-format` / `--log-format` and `--log-level` from the agent's arguments (parsed again, strictly, by {@link parseAgentArgs}). */
function loggingFlagsOf(argv: readonly string[]): { format?: string; level?: string } {
  const value = (names: string[]): string | undefined => {
    for (let i = 0; i < argv.length; i++) {
      for (const n of names) {
        if (argv[i] === n) return argv[i + 1];
        if (argv[i]!.startsWith(`${n}=`)) return argv[i]!.slice(n.length + 1);
      }
    }
    return undefined;
  };
  const format = value(['--logging-format', '--log-format']);
  const level = value(['--log-level']);
  return { ...(format !== undefined ? { format } : {}), ...(level !== undefined ? { level } : {}) };
}

/** `agent`: run until SIGTERM/SIGINT, then send GOAWAY and exit. */
export async function agentCommand(argv: string[]): Promise<number | void> {
  let log: AgentLogger;
  try {
    log = stderrLogger(parseLogging(loggingFlagsOf(argv), process.stderr));
  } catch (e) {
    process.stderr.write(`kube-stream-proxy agent: ${(e as Error).message}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = await parseAgentArgs(argv, log);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`kube-stream-proxy agent: ${e.message}\n\n${AGENT_USAGE}`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(AGENT_USAGE);
    return 0;
  }
  log.info(heapFloorLogFields(), 'heap floor');
  const agent = new AgentPool(parsed.options);
  process.stdout.write(
    `kube-stream-proxy agent for cluster ${parsed.options.clusterName}: proxy ${parsed.options.proxyUrls.map((u) => u.origin).join(', ')}, upstream ${parsed.options.upstream.url.origin}, access as ${parsed.options.accessAs ?? 'passthrough'}\n`,
  );
  const stop = (): void => {
    agent.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
