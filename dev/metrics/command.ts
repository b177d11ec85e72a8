/**
 * The `kube-stream-proxy dev-metrics` subcommand: flags (kube-apiserver's and metrics-server's
 * spellings), help text, and running {@link startDevMetrics} until SIGINT/SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isLoopbackHost, parseGoDuration } from '../../src/config.js';
import { parseHostPort } from '../../src/listen-address.js';
import { DEFAULT_METRIC_RESOLUTION_MS, DEFAULT_SCRAPE_INTERVAL_MS, startDevMetrics, type DevMetricsOptions } from './dev-metrics.js';

/** `dev-metrics --help`. */
export const DEV_METRICS_USAGE = `kube-stream-proxy dev-metrics: a metrics.k8s.io/v1beta1 extension API server (what metrics-server
is in a cluster) for the embedded dev setup.

It serves PodMetrics and NodeMetrics (list and get, labelSelector and fieldSelector on lists) with
its own legacy and aggregated discovery, and /healthz, /livez, /readyz. Every --scrape-interval it
lists the cluster's nodes and pods and reads each node's kubelet resource metrics through the API
(GET /api/v1/nodes/<node>/proxy/metrics/resource); CPU usage is the rate of the cumulative counter
over up to --metric-resolution, memory the working set. Register it as the APIService
v1beta1.metrics.k8s.io so 'kubectl top' works through an aggregating proxy.

Usage:
  kube-stream-proxy dev-metrics --cluster URL [flags]

Flags:
  --listen HOST:PORT                      Address to listen on (default 127.0.0.1:6445; port 0 picks a free port).
                                          Plain HTTP only on loopback.
  --cluster URL                           The cluster's API (e.g. the dev cluster's http://127.0.0.1:6444).
  --cluster-token-file PATH               Bearer token for the cluster (re-read on every request).
  --cluster-ca-file PATH                  PEM CA bundle verifying an https cluster.
  --tls-cert-file PATH                    Serve HTTPS with this PEM certificate. As an APIService backend
                                          its SAN must hold the name the aggregator dials:
                                          <service>.<namespace>.svc, e.g. metrics-server.kube-system.svc.
  --tls-private-key-file PATH             PEM key of --tls-cert-file.
  --requestheader-client-ca-file PATH     Accept only front proxies with a client certificate of this CA and
                                          take the user from their X-Remote-* headers (needs TLS); others get 401
                                          (/healthz, /livez, /readyz stay open to probes).
  --requestheader-allowed-names A,B       Front-proxy certificate CommonNames allowed (default: any).
  --requestheader-username-headers H,…    Default X-Remote-User.
  --requestheader-group-headers H,…       Default X-Remote-Group.
  --requestheader-extra-headers-prefix P,…  Default X-Remote-Extra-.
  --scrape-interval DURATION              How often the kubelets are read (default ${DEFAULT_SCRAPE_INTERVAL_MS / 1000}s): the first
                                          figures are served this long after start.
  --metric-resolution DURATION            The longest window usage is averaged over (default ${DEFAULT_METRIC_RESOLUTION_MS / 1000}s).
  -h, --help                              Show this help.
`;

/** What the flags ask for. */
export type DevMetricsArgs = { help: true } | { help: false; options: DevMetricsOptions };

const list = (v: string | undefined): string[] | undefined =>
  v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s !== '');

/** Parse the flags, reading the files; throws an Error naming the flag on bad input. */
export function parseDevMetricsArgs(argv: string[]): DevMetricsArgs {
  const { values } = parseArgs({
    args: argv,
    options: {
      listen: { type: 'string', default: '127.0.0.1:6445' },
      cluster: { type: 'string' },
      'cluster-token-file': { type: 'string' },
      'cluster-ca-file': { type: 'string' },
      'tls-cert-file': { type: 'string' },
      'tls-private-key-file': { type: 'string' },
      'requestheader-client-ca-file': { type: 'string' },
      'requestheader-allowed-names': { type: 'string' },
      'requestheader-username-headers': { type: 'string' },
      'requestheader-group-headers': { type: 'string' },
      'requestheader-extra-headers-prefix': { type: 'string' },
      'scrape-interval': { type: 'string' },
      'metric-resolution': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) return { help: true };
  if (!values.cluster) throw new Error('--cluster is required');
  const { host, port } = parseHostPort(values.listen);
  const options: DevMetricsOptions = { host, port, cluster: values.cluster, clusterTokenFile: values['cluster-token-file'] };
  if (values['cluster-ca-file'] !== undefined) options.clusterCa = readFileSync(values['cluster-ca-file']);
  const certFile = values['tls-cert-file'];
  const keyFile = values['tls-private-key-file'];
  if ((certFile === undefined) !== (keyFile === undefined)) throw new Error('--tls-cert-file and --tls-private-key-file must be given together');
  if (certFile !== undefined) options.tls = { cert: readFileSync(certFile), key: readFileSync(keyFile!) };
  else if (!isLoopbackHost(host)) throw new Error(`--listen ${values.listen}: plain HTTP is allowed only on a loopback address; give --tls-cert-file and --tls-private-key-file`);
  const caFile = values['requestheader-client-ca-file'];
  if (caFile !== undefined) {
    if (!options.tls) throw new Error('--requestheader-client-ca-file needs --tls-cert-file and --tls-private-key-file (client certificates need TLS)');
    options.requestHeader = {
      clientCa: readFileSync(caFile),
      allowedNames: list(values['requestheader-allowed-names']),
      usernameHeaders: list(values['requestheader-username-headers']),
      groupHeaders: list(values['requestheader-group-headers']),
      extraHeaderPrefixes: list(values['requestheader-extra-headers-prefix']),
    };
  } else {
    for (const flag of ['requestheader-allowed-names', 'requestheader-username-headers', 'requestheader-group-headers', 'requestheader-extra-headers-prefix'] as const) {
      if (values[flag] !== undefined) throw new Error(`--${flag} needs --requestheader-client-ca-file`);
    }
  }
  const duration = (flag: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const ms = parseGoDuration(v);
    if (!(ms > 0)) throw new Error(`--${flag}: must be positive, got ${JSON.stringify(v)}`);
    return ms;
  };
  options.scrapeIntervalMs = duration('scrape-interval', values['scrape-interval']);
  options.metricResolutionMs = duration('metric-resolution', values['metric-resolution']);
  return { help: false, options };
}

/** Run `dev-metrics`; resolves with an exit code on bad flags or `--help`, else runs until a signal. */
export async function devMetricsCommand(argv: string[]): Promise<number | void> {
  let args: DevMetricsArgs;
  try {
    args = parseDevMetricsArgs(argv);
  } catch (e) {
    process.stderr.write(`kube-stream-proxy dev-metrics: ${(e as Error).message}\n\n${DEV_METRICS_USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(DEV_METRICS_USAGE);
    return 0;
  }
  const metrics = await startDevMetrics(args.options);
  process.stdout.write(`dev-metrics listening on ${metrics.url}, scraping ${args.options.cluster}\n`);
  let closing = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (closing) process.exit(1);
    closing = true;
    process.stderr.write(`kube-stream-proxy dev-metrics: ${signal}, shutting down\n`);
    metrics.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
