/**
 * The demo's aggregated API: `dev-metrics` (metrics.k8s.io/v1beta1 from the dev cluster's real pod
 * processes) behind the proxy as a real extension API server would be — HTTPS with a serving
 * certificate for `metrics-server.kube-system.svc`, the proxy's front-proxy client certificate, and
 * an APIService `v1beta1.metrics.k8s.io` (with its `caBundle`) in the file the
 * proxy reads with `--apiservice-config`. So `kubectl top pod` works through `npm start`.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCa, createClientCert, createServerCert } from './dev-pki.js';
import { startDevMetrics, type DevMetrics } from './metrics/dev-metrics.js';

/** The front-proxy client certificate's CommonName (dev-metrics allows only it). */
export const DEMO_FRONT_PROXY_CN = 'front-proxy-client';

/** What the demo hands the proxy. */
export interface DemoMetrics {
  metrics: DevMetrics;
  /** `--apiservice-config`. */
  apiserviceConfigFile: string;
  /** `--proxy-client-cert-file` / `--proxy-client-key-file`. */
  proxyClientCertFile: string;
  proxyClientKeyFile: string;
}

/** The APIService document registering dev-metrics, as a cluster's metrics-server installs it. */
export function metricsAPIService(caBundle: Buffer, service: { namespace: string; name: string; port: number } | { backendUrl: string }): string {
  const where =
    'backendUrl' in service
      ? `  annotations:\n    kube-stream-proxy.io/backend-url: ${service.backendUrl}\nspec:\n  service: null\n`
      : `spec:\n  service:\n    namespace: ${service.namespace}\n    name: ${service.name}\n    port: ${service.port}\n`;
  return [
    'apiVersion: apiregistration.k8s.io/v1',
    'kind: APIService',
    'metadata:',
    '  name: v1beta1.metrics.k8s.io',
    '  labels:',
    '    k8s-app: metrics-server',
    where.trimEnd(),
    '  group: metrics.k8s.io',
    '  version: v1beta1',
    `  caBundle: ${caBundle.toString('base64')}`,
    '  groupPriorityMinimum: 100',
    '  versionPriority: 100',
    '',
  ].join('\n');
}

/** The Service the demo's APIService names, seeded into the dev cluster at start (`services`). */
export const METRICS_SERVICE = { namespace: 'kube-system', name: 'metrics-server', ports: [{ name: 'https', port: 443 }], labels: { 'k8s-app': 'metrics-server' } };

/**
 * Publish dev-metrics' address as the Service's EndpointSlice (what the EndpointSlice controller
 * does for a real metrics-server pod): one ready `127.0.0.1` endpoint on `port`, port name `https`.
 */
async function publishEndpointSlice(clusterUrl: string, port: number, token?: string): Promise<void> {
  const body = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'metrics-server-dev', namespace: METRICS_SERVICE.namespace, labels: { 'kubernetes.io/service-name': METRICS_SERVICE.name, 'k8s-app': 'metrics-server' } },
    addressType: 'IPv4',
    ports: [{ name: 'https', port, protocol: 'TCP' }],
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
  };
  const res = await fetch(`${clusterUrl}/apis/discovery.k8s.io/v1/namespaces/${METRICS_SERVICE.namespace}/endpointslices`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`publishing the metrics-server EndpointSlice: ${res.status} ${await res.text()}`);
}

/**
 * Issue the PKI into `dir`, start dev-metrics scraping the dev cluster at `clusterUrl` (started
 * with {@link METRICS_SERVICE} seeded), publish its EndpointSlice, and write the APIService file
 * naming the Service — so the proxy resolves it as kube-aggregator does.
 */
export async function startDemoMetrics(dir: string, clusterUrl: string, o: { clusterTokenFile?: string } = {}): Promise<DemoMetrics> {
  const pki = join(dir, 'pki');
  mkdirSync(pki, { recursive: true });
  const ca = await createCa(pki, 'kube-stream-proxy demo CA');
  const [serving, frontProxy] = await Promise.all([
    createServerCert(pki, ca, { stem: 'metrics-server', cn: 'metrics-server.kube-system.svc', san: 'DNS:metrics-server.kube-system.svc,IP:127.0.0.1' }),
    createClientCert(pki, ca, { cn: DEMO_FRONT_PROXY_CN, name: 'front-proxy-client' }),
  ]);
  const metrics = await startDevMetrics({
    cluster: clusterUrl,
    tls: { cert: serving.cert, key: serving.key },
    // demo --oidc: the dev cluster has token authentication.
    ...(o.clusterTokenFile ? { clusterTokenFile: o.clusterTokenFile } : {}),
    // Like the dev cluster it reads, open to every caller: the demo proxy runs in passthrough, where
    // the caller's own (here: no) credentials reach the backend. The impersonate-mode front-proxy
    // path is exercised by test/aggregation/.
  });
  try {
    await publishEndpointSlice(clusterUrl, metrics.port, o.clusterTokenFile ? readFileSync(o.clusterTokenFile, 'utf8').trim() : undefined);
  } catch (e) {
    await metrics.close();
    throw e;
  }
  const apiserviceConfigFile = join(dir, 'apiservices.yaml');
  writeFileSync(apiserviceConfigFile, metricsAPIService(ca.cert, { namespace: METRICS_SERVICE.namespace, name: METRICS_SERVICE.name, port: 443 }));
  return { metrics, apiserviceConfigFile, proxyClientCertFile: frontProxy.certFile, proxyClientKeyFile: frontProxy.keyFile };
}
