/**
 * The `serve` configuration: one typed object, validated once at start-up from the command-line
 * flags. Every default is a named constant with the reason for its value.
 */
import { parseRecordingFlags, type RecordingFlags, type SessionRecordingSettings } from './recording/recording-flags.js';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { ConfigError } from './errors.js';
import { parseFeatureGates, type FeatureGates } from './feature-gate.js';
import { parseHostPort, type HostPort } from './listen-address.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { AuthnMode } from './auth/request-auth.js';
import { parseCertificateBundle } from './auth/client-certificate.js';
import { parseAllowedOrigins, type AllowedOrigins } from './auth/websocket-origin.js';
import type { JwtAuthenticationConfig } from './auth/jwt-authentication.js';
import { parseJwtServeFlags, type JwtServeFlags } from './auth/jwt-serve-flags.js';
import { DEFAULT_EXTRA_HEADER_PREFIXES, DEFAULT_GROUP_HEADERS, DEFAULT_USERNAME_HEADERS, type RequestHeaderConfig } from './auth/request-header.js';
import type { KubeletClientConfig } from './routing/kubelet/kubelet-locator.js';
import { DEFAULT_PREFERRED_ADDRESS_TYPES } from './routing/kubelet/node-address.js';
import { Upstream, upstreamFromFiles, upstreamFromKubeConfig, type UpstreamOptions } from './routing/upstream.js';
import type { APIServiceConfig } from './aggregation/apiservice-config.js';
import type { ProxyClientCertificate } from './aggregation/apiservice-backend.js';
import { useTrimmedTokenFiles } from './token-file.js';
import { AgentTokenFile } from './tunnel/agent-tokens.js';

/** Default listen address: loopback, so plain HTTP without certificates is allowed out of the box. */
export const DEFAULT_LISTEN = '127.0.0.1:6443';

/**
 * Default wait for the upstream's answer to an upgrade. kubectl's own dial timeout is 30 s
 * (`kubectl proxy`, client-go `DialTimeout`); a kubelet that has not answered by then will not.
 */
export const DEFAULT_UPGRADE_RESPONSE_TIMEOUT = '30s';

/**
 * Default time streaming sessions get to finish after SIGTERM: 30 s, the Kubernetes default
 * `terminationGracePeriodSeconds`, minus nothing: the manifests give the pod 45 s so the proxy's own
 * close (Status on channel 3, waiting for the client's close) fits inside.
 */
export const DEFAULT_SHUTDOWN_GRACE_PERIOD = '30s';

/**
 * Default `--request-timeout`: 0, none. kube-apiserver's own default is 1m for requests that are not
 * long-running; the upstream apiserver already applies it, and a second, shorter timer in front of it
 * would only cut requests the upstream would have finished.
 */
export const DEFAULT_REQUEST_TIMEOUT = '0';

/** Default per-connection bandwidth: 0 = unlimited, as kube-apiserver's `--max-connection-bytes-per-sec`. */
export const DEFAULT_MAX_CONNECTION_BYTES_PER_SEC = 0;

/**
 * `--upstream-streaming`: which protocol exec, attach and port-forward speak to an upstream apiserver,
 * an agent's cluster or an APIService backend (not to kubelets: there the node's `declaredFeatures`
 * decide). `auto`: the client's own protocol first, the other one (translated here) when the upstream
 * refuses it before its 101; `websocket`: never SPDY upstream (WebSocket passed through, SPDY clients
 * translated); `spdy`: never WebSocket v5 or the tunnel upstream (translated here, as before 1.36).
 */
export type UpstreamStreaming = 'auto' | 'websocket' | 'spdy';

/**
 * Default `--upstream-streaming`: `auto`. Choosing by version is wrong (OpenShift ships ≥ 1.30 and
 * refuses WebSocket exec; gateways never offered SPDY): ask in the client's protocol, fall back before
 * the 101, as kubectl's own fallback does.
 */
export const DEFAULT_UPSTREAM_STREAMING: UpstreamStreaming = 'auto';

/** Listener TLS material (PEM). */
export interface ListenTls {
  cert: Buffer;
  key: Buffer;
}

/** `--upstream-mode`. */
export type UpstreamMode = 'apiserver' | 'kubelet';

/** Who decides who may do what, and where streaming requests go (issue: upstream modes and security). */
export interface SecurityConfig {
  upstreamMode: UpstreamMode;
  authn: AuthnMode;
  /** `--client-ca-file` (PEM): client certificates verified against it authenticate as CN/O. */
  clientCa?: Buffer;
  /** `--requestheader-*`, with the CA as PEM too (the listener trusts it). */
  requestHeader?: RequestHeaderConfig & { caPem: Buffer };
  /** kubelet mode: the kubelet client settings. */
  kubelet?: KubeletClientConfig;
  /** The proxy's own API credentials, for TokenReview, SubjectAccessReview and pod/node lookups. */
  apiKubeConfig: () => Promise<KubeConfig>;
  /** `--authentication-config` or the `--oidc-*` flags (impersonate only): JWT authenticators before TokenReview. */
  jwt?: JwtAuthenticationConfig;
  /** Start-up warnings (insecure settings) the CLI logs. */
  warnings: string[];
}

/** `--agent-listen` and what goes with it: where agents dial in and how they authenticate. */
export interface AgentListenConfig {
  listen: HostPort;
  /** The serving certificate (the `--tls-*` pair); absent = plain TCP, allowed only on loopback. */
  tls?: ListenTls;
  /** `--agent-token-file`, read once here and re-read on change; absent = client certificates only. */
  tokens?: AgentTokenFile;
  /**
   * `--agent-client-ca-file`: agents may authenticate with a client certificate verified by this
   * CA bundle, CN = the cluster name (TLS listener only).
   */
  clientCa?: Buffer;
}

/** The validated configuration `startServer` runs with. */
export interface ProxyConfig {
  /** Address to listen on; port 0 picks a free port. */
  listen: HostPort;
  /** HTTPS certificate and key; absent means plain HTTP, allowed only on loopback. */
  tls?: ListenTls;
  /**
   * Where requests without a `/clusters/NAME` prefix go and how to authenticate there. Absent only
   * with agents (`--agent-listen` without `--upstream`): such requests then get a 404 Status.
   */
  upstream?: Upstream;
  /** Clusters behind agents (docs/agent.md); absent = no agent listener. */
  agents?: AgentListenConfig;
  /** Per-direction byte rate of each upgraded connection; 0 = unlimited. */
  maxConnectionBytesPerSec: number;
  /** Kubernetes feature gates (`--feature-gates`). */
  featureGates: FeatureGates;
  /** `--upstream-streaming`; {@link DEFAULT_UPSTREAM_STREAMING} when absent. */
  upstreamStreaming?: UpstreamStreaming;
  /** How long to wait for the upstream's response head on an upgrade, in milliseconds. */
  upgradeResponseTimeoutMs: number;
  /** After SIGTERM, how long streaming sessions may run before the proxy ends them, in milliseconds. */
  shutdownGracePeriodMs: number;
  /** `--request-timeout` in ms for requests that are not long-running; 0 = none (the upstream's own applies). */
  requestTimeoutMs: number;
  /** Authentication, authorization and upstream mode; passthrough to an apiserver when absent. */
  security?: SecurityConfig;
  /** API aggregation (`--apiservice-config`); absent: every request goes to the primary upstream. */
  aggregation?: AggregationConfig;
  /** `--websocket-allowed-origins`; {@link DEFAULT_WEBSOCKET_ALLOWED_ORIGINS} when absent. */
  websocketAllowedOrigins?: AllowedOrigins;
  /** Session recording (`--session-recording-*`, docs/recording.md); absent: nothing is recorded. */
  recording?: SessionRecordingSettings;
}

/** `--apiservice-config` and the front-proxy identity (`--proxy-client-*-file`). */
export interface AggregationConfig {
  /** The APIService documents of `--apiservice-config`, validated at start-up and kept current as the file changes. */
  apiServices: APIServiceConfig;
  /** The client certificate presented to aggregated API servers. */
  proxyClient?: ProxyClientCertificate;
}

/**
 * The `serve` flags as strings, exactly as given (camelCase of the flag names); the recording's and
 * the JWT authenticator's (`--authentication-config`, `--oidc-*`) are declared with them.
 */
export interface ServeFlags extends RecordingFlags, JwtServeFlags {
  listen?: string;
  tlsCertFile?: string;
  tlsPrivateKeyFile?: string;
  upstream?: string;
  upstreamCaFile?: string;
  upstreamTokenFile?: string;
  upstreamClientCertFile?: string;
  upstreamClientKeyFile?: string;
  kubeconfig?: string;
  inCluster?: boolean;
  maxConnectionBytesPerSec?: string;
  featureGates?: string;
  upgradeResponseTimeout?: string;
  shutdownGracePeriod?: string;
  requestTimeout?: string;
  upstreamInsecureSkipTlsVerify?: boolean;
  upstreamMode?: string;
  upstreamStreaming?: string;
  authn?: string;
  clientCaFile?: string;
  requestheaderClientCaFile?: string;
  requestheaderAllowedNames?: string;
  requestheaderUsernameHeaders?: string;
  requestheaderGroupHeaders?: string;
  requestheaderExtraHeadersPrefix?: string;
  kubeletClientCertificate?: string;
  kubeletClientKey?: string;
  kubeletCertificateAuthority?: string;
  kubeletPreferredAddressTypes?: string;
  kubeletInsecureSkipTlsVerify?: boolean;
  apiserviceConfig?: string;
  proxyClientCertFile?: string;
  proxyClientKeyFile?: string;
  websocketAllowedOrigins?: string;
  agentListen?: string;
  agentTokenFile?: string;
  agentClientCaFile?: string;
}

const DURATION_UNITS_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parse a Go duration (`30s`, `1m30s`, `1.5h`, `250ms`, `0`) into milliseconds. */
export function parseGoDuration(value: string): number {
  const s = value.trim();
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  if (s === '') throw new ConfigError(`invalid duration ""`);
  while (at < s.length) {
    re.lastIndex = at;
    const m = re.exec(s);
    if (!m) throw new ConfigError(`invalid duration ${JSON.stringify(value)}: want e.g. 30s, 1m, 1m30s`);
    total += Number(m[1]) * (DURATION_UNITS_MS[m[2]!] ?? NaN);
    at = re.lastIndex;
  }
  return total;
}

/** True for 127.0.0.0/8, ::1, ::ffff:127.x and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const v = isIP(host);
  if (v === 4) return host.startsWith('127.');
  if (v === 6) return host === '::1' || /^::ffff:127\./i.test(host) || /^0{0,4}(:0{0,4}){6}:0{0,3}1$/.test(host);
  return false;
}

function readListenFile(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new ConfigError(`${flag}: cannot read ${path}: ${(e as Error).message}`, { cause: e });
  }
}

function parseListen(flags: ServeFlags): { listen: HostPort; tls?: ListenTls } {
  let listen: HostPort;
  try {
    listen = parseHostPort(flags.listen ?? DEFAULT_LISTEN);
  } catch (e) {
    throw new ConfigError(`--listen: ${(e as Error).message}`, { cause: e });
  }
  const hasCert = flags.tlsCertFile !== undefined;
  const hasKey = flags.tlsPrivateKeyFile !== undefined;
  if (hasCert !== hasKey) throw new ConfigError('--tls-cert-file and --tls-private-key-file must be given together');
  if (hasCert && hasKey) {
    return {
      listen,
      tls: {
        cert: readListenFile('--tls-cert-file', flags.tlsCertFile!),
        key: readListenFile('--tls-private-key-file', flags.tlsPrivateKeyFile!),
      },
    };
  }
  if (!isLoopbackHost(listen.host)) {
    throw new ConfigError(
      `--listen ${flags.listen ?? DEFAULT_LISTEN}: plain HTTP is allowed only on a loopback address; ` +
        'give --tls-cert-file and --tls-private-key-file to listen on other addresses',
    );
  }
  return { listen };
}

/** Comma-separated flag values, trimmed, empty entries dropped. */
function listFlag(value: string | undefined, fallback: readonly string[]): string[] {
  if (value === undefined) return [...fallback];
  return value.split(',').map((v) => v.trim()).filter((v) => v !== '');
}

/** A kubeconfig for the proxy's own API calls built from the `--upstream-*` file flags. */
async function kubeConfigFromFiles(flags: ServeFlags): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  const user: Record<string, unknown> = { name: 'kube-stream-proxy' };
  if (flags.upstreamTokenFile !== undefined) user.authProvider = { name: 'tokenFile', config: { tokenFile: flags.upstreamTokenFile } };
  if (flags.upstreamClientCertFile !== undefined) user.certFile = flags.upstreamClientCertFile;
  if (flags.upstreamClientKeyFile !== undefined) user.keyFile = flags.upstreamClientKeyFile;
  // client-node refuses a plain-http server unless skipTLSVerify is set; there is nothing to verify there.
  const plainHttp = flags.upstream!.startsWith('http:');
  const cluster: Record<string, unknown> = { name: 'upstream', server: flags.upstream!, skipTLSVerify: flags.upstreamInsecureSkipTlsVerify === true || plainHttp };
  if (flags.upstreamCaFile !== undefined) cluster.caFile = flags.upstreamCaFile;
  kc.loadFromOptions({
    clusters: [cluster],
    users: [user],
    contexts: [{ name: 'upstream', cluster: 'upstream', user: 'kube-stream-proxy' }],
    currentContext: 'upstream',
  });
  // client-node reads a tokenFile raw; the file's final newline must not reach the header.
  return useTrimmedTokenFiles(kc);
}

/**
 * The upstream from `--upstream` and its `--upstream-*` file flags, or `--kubeconfig` /
 * `--in-cluster` (optionally with `--upstream` overriding the server), and the KubeConfig for the
 * API calls made with the same credentials. Shared by `serve` and `agent`. `presentProxyIdentity`:
 * see {@link UpstreamOptions}.
 */
export async function parseUpstream(flags: ServeFlags, presentProxyIdentity: boolean): Promise<{ upstream?: Upstream; apiKubeConfig: () => Promise<KubeConfig> }> {
  const fileFlags = [flags.upstreamCaFile, flags.upstreamTokenFile, flags.upstreamClientCertFile, flags.upstreamClientKeyFile];
  const sources = [flags.kubeconfig !== undefined, flags.inCluster === true].filter(Boolean).length;
  if (sources > 1) throw new ConfigError('--kubeconfig and --in-cluster are mutually exclusive');
  if (sources === 1) {
    if (fileFlags.some((f) => f !== undefined)) {
      throw new ConfigError('--upstream-ca-file, --upstream-token-file and --upstream-client-*-file cannot be combined with --kubeconfig or --in-cluster');
    }
    // Loaded on demand: importing client-node costs about 1.5 s of start-up on this machine class.
    const { KubeConfig } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    try {
      // KSP_IN_CLUSTER_PATH_PREFIX: a directory the service-account paths are looked up under
      // (client-node's pathPrefix), for tests and chroots; unset in a pod.
      if (flags.inCluster) kc.loadFromCluster(process.env.KSP_IN_CLUSTER_PATH_PREFIX ?? '');
      else kc.loadFromFile(flags.kubeconfig!);
    } catch (e) {
      throw new ConfigError(`${flags.inCluster ? '--in-cluster' : '--kubeconfig'}: ${(e as Error).message}`, { cause: e });
    }
    // One KubeConfig serves the upstream's auth headers and the API client: both get trimmed tokens.
    useTrimmedTokenFiles(kc);
    if (flags.upstream !== undefined) {
      const cluster = kc.getCurrentCluster();
      if (cluster) (cluster as { server: string }).server = flags.upstream;
    }
    return { upstream: await upstreamFromKubeConfig(kc, flags.upstream, { presentProxyIdentity }), apiKubeConfig: async () => kc };
  }
  if (flags.upstream === undefined && flags.agentListen !== undefined && !fileFlags.some((f) => f !== undefined)) {
    // Agents only: the proxy has no API of its own to call.
    return { apiKubeConfig: async () => Promise.reject(new ConfigError('no --upstream: the proxy has no API of its own')) };
  }
  if (flags.upstream === undefined) throw new ConfigError('--upstream URL (or --kubeconfig / --in-cluster, or --agent-listen) is required');
  const upstream = upstreamFromFiles({
    url: flags.upstream,
    caFile: flags.upstreamCaFile,
    tokenFile: flags.upstreamTokenFile,
    clientCertFile: flags.upstreamClientCertFile,
    clientKeyFile: flags.upstreamClientKeyFile,
    insecureSkipTlsVerify: flags.upstreamInsecureSkipTlsVerify === true,
    presentProxyIdentity,
  });
  let kc: Promise<KubeConfig> | undefined;
  return { upstream, apiKubeConfig: () => (kc ??= kubeConfigFromFiles(flags)) };
}

/** Parse `--agent-listen`, `--agent-token-file` and `--agent-client-ca-file`. */
function parseAgents(flags: ServeFlags, tls: ListenTls | undefined): AgentListenConfig | undefined {
  if (flags.agentListen === undefined) {
    if (flags.agentTokenFile !== undefined) throw new ConfigError('--agent-token-file needs --agent-listen');
    if (flags.agentClientCaFile !== undefined) throw new ConfigError('--agent-client-ca-file needs --agent-listen');
    return undefined;
  }
  let listen: HostPort;
  try {
    listen = parseHostPort(flags.agentListen);
  } catch (e) {
    throw new ConfigError(`--agent-listen: ${(e as Error).message}`, { cause: e });
  }
  if (!tls && !isLoopbackHost(listen.host)) {
    throw new ConfigError(`--agent-listen ${flags.agentListen}: plain TCP is allowed only on a loopback address; give --tls-cert-file and --tls-private-key-file`);
  }
  if (flags.agentTokenFile === undefined && flags.agentClientCaFile === undefined) {
    throw new ConfigError('--agent-listen needs --agent-token-file (CSV token,cluster-name) or --agent-client-ca-file (client certificates, CN = cluster name)');
  }
  if (flags.agentClientCaFile !== undefined && !tls) {
    throw new ConfigError('--agent-client-ca-file needs a TLS agent listener: give --tls-cert-file and --tls-private-key-file');
  }
  return {
    listen,
    ...(flags.agentTokenFile !== undefined ? { tokens: new AgentTokenFile(flags.agentTokenFile) } : {}),
    ...(flags.agentClientCaFile !== undefined ? { clientCa: readListenFile('--agent-client-ca-file', flags.agentClientCaFile) } : {}),
    ...(tls ? { tls } : {}),
  };
}

/** Parse `--upstream-mode`, `--authn`, the client CA, request-header and kubelet flags. */
function parseSecurity(flags: ServeFlags, listenTls: boolean): Omit<SecurityConfig, 'apiKubeConfig' | 'warnings'> & { warnings: string[] } {
  const warnings: string[] = [];
  const upstreamMode = (flags.upstreamMode ?? 'apiserver') as UpstreamMode;
  if (upstreamMode !== 'apiserver' && upstreamMode !== 'kubelet') {
    throw new ConfigError(`--upstream-mode: want apiserver or kubelet, got ${JSON.stringify(flags.upstreamMode)}`);
  }
  const authn = (flags.authn ?? (upstreamMode === 'kubelet' ? 'impersonate' : 'passthrough')) as AuthnMode;
  if (authn !== 'passthrough' && authn !== 'impersonate') throw new ConfigError(`--authn: want passthrough or impersonate, got ${JSON.stringify(flags.authn)}`);
  if (upstreamMode === 'kubelet' && authn !== 'impersonate') {
    throw new ConfigError('--upstream-mode=kubelet needs --authn=impersonate: a kubelet cannot authenticate or authorize the caller');
  }
  const security: Omit<SecurityConfig, 'apiKubeConfig' | 'warnings'> & { warnings: string[] } = { upstreamMode, authn, warnings };
  const certFlags = flags.clientCaFile !== undefined || flags.requestheaderClientCaFile !== undefined;
  if (certFlags && !listenTls) throw new ConfigError('--client-ca-file and --requestheader-client-ca-file need an HTTPS listener (--tls-cert-file)');
  if (certFlags && authn !== 'impersonate') {
    throw new ConfigError('--client-ca-file and --requestheader-client-ca-file need --authn=impersonate: in passthrough the upstream authenticates callers');
  }
  const bundle = (flag: string, path: string): Buffer => {
    const pem = readListenFile(flag, path);
    try {
      parseCertificateBundle(pem);
    } catch (e) {
      throw new ConfigError(`${flag}: ${path}: ${(e as Error).message}`, { cause: e });
    }
    return pem;
  };
  if (flags.clientCaFile !== undefined) security.clientCa = bundle('--client-ca-file', flags.clientCaFile);
  if (flags.requestheaderClientCaFile !== undefined) {
    const caPem = bundle('--requestheader-client-ca-file', flags.requestheaderClientCaFile);
    security.requestHeader = {
      caPem,
      ca: parseCertificateBundle(caPem),
      allowedNames: listFlag(flags.requestheaderAllowedNames, []),
      usernameHeaders: listFlag(flags.requestheaderUsernameHeaders, DEFAULT_USERNAME_HEADERS),
      groupHeaders: listFlag(flags.requestheaderGroupHeaders, DEFAULT_GROUP_HEADERS),
      extraHeaderPrefixes: listFlag(flags.requestheaderExtraHeadersPrefix, DEFAULT_EXTRA_HEADER_PREFIXES),
    };
  }
  const kubeletFlags = [flags.kubeletClientCertificate, flags.kubeletClientKey, flags.kubeletCertificateAuthority, flags.kubeletPreferredAddressTypes];
  if (upstreamMode === 'kubelet') {
    if ((flags.kubeletClientCertificate === undefined) !== (flags.kubeletClientKey === undefined)) {
      throw new ConfigError('--kubelet-client-certificate and --kubelet-client-key must be given together');
    }
    if (flags.kubeletClientCertificate === undefined) throw new ConfigError('--upstream-mode=kubelet needs --kubelet-client-certificate and --kubelet-client-key');
    const insecure = flags.kubeletInsecureSkipTlsVerify === true;
    if (flags.kubeletCertificateAuthority === undefined && !insecure) {
      throw new ConfigError('--upstream-mode=kubelet needs --kubelet-certificate-authority (or, insecurely, --kubelet-insecure-skip-tls-verify)');
    }
    if (insecure) warnings.push('--kubelet-insecure-skip-tls-verify: kubelet serving certificates are NOT verified');
    const kubelet: KubeletClientConfig = {
      cert: readListenFile('--kubelet-client-certificate', flags.kubeletClientCertificate),
      key: readListenFile('--kubelet-client-key', flags.kubeletClientKey!),
      insecureSkipTlsVerify: insecure,
      preferredAddressTypes: listFlag(flags.kubeletPreferredAddressTypes, DEFAULT_PREFERRED_ADDRESS_TYPES),
    };
    if (flags.kubeletCertificateAuthority !== undefined) kubelet.ca = bundle('--kubelet-certificate-authority', flags.kubeletCertificateAuthority);
    security.kubelet = kubelet;
  } else if (kubeletFlags.some((f) => f !== undefined) || flags.kubeletInsecureSkipTlsVerify) {
    throw new ConfigError('--kubelet-* flags need --upstream-mode=kubelet');
  }
  if (flags.upstreamInsecureSkipTlsVerify) warnings.push('--upstream-insecure-skip-tls-verify: the upstream serving certificate is NOT verified');
  return security;
}

/** Validate the flags and load every file they name. Throws ConfigError with the offending flag. */
export async function resolveConfig(flags: ServeFlags): Promise<ProxyConfig> {
  const { listen, tls } = parseListen(flags);

  const bpsText = flags.maxConnectionBytesPerSec ?? String(DEFAULT_MAX_CONNECTION_BYTES_PER_SEC);
  if (!/^\d+$/.test(bpsText.trim()) || !Number.isSafeInteger(Number(bpsText))) {
    throw new ConfigError(`--max-connection-bytes-per-sec: want a non-negative integer, got ${JSON.stringify(bpsText)}`);
  }

  const featureGates = parseFeatureGates(flags.featureGates);
  const upstreamStreaming = (flags.upstreamStreaming ?? DEFAULT_UPSTREAM_STREAMING) as UpstreamStreaming;
  if (upstreamStreaming !== 'auto' && upstreamStreaming !== 'websocket' && upstreamStreaming !== 'spdy') {
    throw new ConfigError(`--upstream-streaming: want auto, websocket or spdy, got ${JSON.stringify(flags.upstreamStreaming)}`);
  }

  let upgradeResponseTimeoutMs: number;
  try {
    upgradeResponseTimeoutMs = parseGoDuration(flags.upgradeResponseTimeout ?? DEFAULT_UPGRADE_RESPONSE_TIMEOUT);
  } catch (e) {
    throw new ConfigError(`--upgrade-response-timeout: ${(e as Error).message}`, { cause: e });
  }
  if (!(upgradeResponseTimeoutMs > 0)) throw new ConfigError('--upgrade-response-timeout: must be greater than 0');

  let shutdownGracePeriodMs: number;
  try {
    shutdownGracePeriodMs = parseGoDuration(flags.shutdownGracePeriod ?? DEFAULT_SHUTDOWN_GRACE_PERIOD);
  } catch (e) {
    throw new ConfigError(`--shutdown-grace-period: ${(e as Error).message}`, { cause: e });
  }

  let requestTimeoutMs: number;
  try {
    requestTimeoutMs = parseGoDuration(flags.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT);
  } catch (e) {
    throw new ConfigError(`--request-timeout: ${(e as Error).message}`, { cause: e });
  }

  const websocketAllowedOrigins = parseAllowedOrigins(flags.websocketAllowedOrigins);
  const securityFlags = parseSecurity(flags, tls !== undefined);
  const { upstream, apiKubeConfig } = await parseUpstream(flags, securityFlags.authn === 'impersonate');
  const agents = parseAgents(flags, tls);
  if (!upstream && securityFlags.upstreamMode !== 'apiserver') throw new ConfigError('--upstream-mode=kubelet needs --upstream');
  if (upstream?.tls && !upstream.tls.rejectUnauthorized && !flags.upstreamInsecureSkipTlsVerify) {
    securityFlags.warnings.push('kubeconfig insecure-skip-tls-verify: the upstream serving certificate is NOT verified');
  }
  const jwt = await parseJwtServeFlags(flags, securityFlags.authn);
  const security: SecurityConfig = { ...securityFlags, apiKubeConfig, ...(jwt ? { jwt } : {}) };
  const config: ProxyConfig = {
    security,
    listen,
    ...(upstream ? { upstream } : {}),
    ...(agents ? { agents } : {}),
    maxConnectionBytesPerSec: Number(bpsText),
    featureGates,
    upstreamStreaming,
    upgradeResponseTimeoutMs,
    shutdownGracePeriodMs,
    requestTimeoutMs,
    websocketAllowedOrigins,
  };
  if (tls) config.tls = tls;
  const recording = await parseRecordingFlags(flags);
  if (recording) config.recording = recording;
  const aggregation = await parseAggregation(flags, security.warnings);
  if (aggregation) config.aggregation = aggregation;
  return config;
}

/** `--apiservice-config` and `--proxy-client-cert-file`/`--proxy-client-key-file`. */
async function parseAggregation(flags: ServeFlags, warnings: string[]): Promise<AggregationConfig | undefined> {
  if ((flags.proxyClientCertFile === undefined) !== (flags.proxyClientKeyFile === undefined)) {
    throw new ConfigError('--proxy-client-cert-file and --proxy-client-key-file must be given together');
  }
  if (flags.apiserviceConfig !== undefined && flags.upstream === undefined && flags.kubeconfig === undefined && flags.inCluster !== true) {
    throw new ConfigError('--apiservice-config needs a primary upstream (--upstream, --kubeconfig or --in-cluster): it serves the merged discovery and local APIServices');
  }
  if (flags.apiserviceConfig === undefined) {
    if (flags.proxyClientCertFile !== undefined) throw new ConfigError('--proxy-client-cert-file needs --apiservice-config: it is presented to aggregated API servers only');
    return undefined;
  }
  const proxyClient: ProxyClientCertificate | undefined =
    flags.proxyClientCertFile !== undefined
      ? { cert: readListenFile('--proxy-client-cert-file', flags.proxyClientCertFile), key: readListenFile('--proxy-client-key-file', flags.proxyClientKeyFile!) }
      : undefined;
  // Loaded on demand (client-node's YAML parser): only when aggregation is configured. Last, so a
  // failing flag above leaves no file watcher behind.
  const { APIServiceConfig } = await import('./aggregation/apiservice-config.js');
  const apiServices = await APIServiceConfig.load(flags.apiserviceConfig);
  for (const a of apiServices.current) {
    if (a.spec.insecureSkipTLSVerify) warnings.push(`APIService ${a.metadata.name}: insecureSkipTLSVerify: the backend's serving certificate is NOT verified`);
  }
  return proxyClient ? { apiServices, proxyClient } : { apiServices };
}
