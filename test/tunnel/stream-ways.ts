/**
 * Test fixture (not a test): which way each streaming session went through the proxy and inside the
 * dev clusters behind it (issue 32), read from counters, so that a tunnel test proves its path
 * instead of inferring it from "kubectl worked" (kubectl ≥ 1.30 falls back to SPDY silently).
 *
 * Keys, flattened (only counters with a value; `moved` gives what changed):
 * - the proxy's `/metrics`: `proxy/<subresource>/<proxy_type>` (`apiserver_websocket_streaming_requests_total`:
 *   `proxied_to_upstream` = passed through to the cluster, `translated_at_apiserver` /
 *   `tunneled_at_apiserver` = translated or unwrapped by the proxy), `proxy/translator/<code>` and
 *   `proxy/tunnel/<code>` (the proxy's own translator and tunnel), and with `fallbacks`
 *   `proxy/fallback/<from>-><to>/<code>` (`kube_stream_proxy_upstream_streaming_fallbacks_total`);
 * - each dev cluster NAME (read in-process, so a cluster with TLS and tokens needs no credentials):
 *   `NAME/apiserver/<subresource>/<proxy_type>` (`proxied_to_kubelet`, `translated_at_apiserver`,
 *   `tunneled_at_apiserver`), `NAME/kubelet/<subresource>` (sessions its 1.36 kubelet served over
 *   WebSockets itself), `NAME/translator/<code>`, `NAME/tunnel/<code>` (translated at its apiserver).
 */
import type { DevCluster } from '../../dev/cluster/dev-cluster.js';
import { counterValue } from '../helpers/metrics.js';

export { moved } from '../dev/cluster/streaming-ways.js';

/** Flattened counters (see the file comment). */
export type Ways = Record<string, number>;

const SUBRESOURCES = ['exec', 'attach', 'portforward'] as const;
const PROXY_TYPES = ['proxied_to_upstream', 'proxied_to_kubelet', 'translated_at_apiserver', 'tunneled_at_apiserver'] as const;

/** Every `family{code="N"} V` sample of `text` as `prefix/N`. */
function byCode(text: string, family: string, prefix: string, out: Ways): void {
  for (const m of text.matchAll(new RegExp(`^${family}\\{code="(\\d+)"\\} (\\d+)$`, 'gm'))) if (Number(m[2]) > 0) out[`${prefix}/${m[1]}`] = Number(m[2]);
}

/** The proxy's counters from its `/metrics` text. */
export function proxyWays(text: string, o: { fallbacks?: boolean } = {}): Ways {
  const out: Ways = {};
  for (const subresource of SUBRESOURCES) {
    for (const proxyType of PROXY_TYPES) {
      const n = counterValue(text, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });
      if (n > 0) out[`proxy/${subresource}/${proxyType}`] = n;
    }
  }
  byCode(text, 'apiserver_stream_translator_requests_total', 'proxy/translator', out);
  byCode(text, 'apiserver_stream_tunnel_requests_total', 'proxy/tunnel', out);
  if (o.fallbacks) {
    for (const line of text.split('\n')) {
      if (!line.startsWith('kube_stream_proxy_upstream_streaming_fallbacks_total{')) continue;
      const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      if (value > 0) out[`proxy/fallback/${labels.from}->${labels.to}/${labels.code}`] = value;
    }
  }
  return out;
}

/** A dev cluster's counters (its apiserver's and its kubelet's), keyed under `name`. */
export function clusterWays(name: string, cluster: DevCluster): Ways {
  return clusterWaysOf(name, cluster.metrics.apiserver.exposition(), cluster.metrics.kubelet.exposition());
}

/**
 * A dev cluster's counters read over HTTP (a cluster in another process, the demo's): its API's
 * `/metrics` and its kubelet's through `nodes/dev-node/proxy/metrics` (no authentication).
 */
export async function fetchClusterWays(name: string, url: string): Promise<Ways> {
  const text = async (path: string): Promise<string> => {
    const res = await fetch(new URL(path, url));
    if (res.status !== 200) throw new Error(`GET ${url}${path}: HTTP ${res.status}`);
    return res.text();
  };
  return clusterWaysOf(name, await text('/metrics'), await text('/api/v1/nodes/dev-node/proxy/metrics'));
}

/** The counters of a dev cluster's API `/metrics` text and its kubelet's, keyed under `name`. */
export function clusterWaysOf(name: string, api: string, kubelet: string): Ways {
  const out: Ways = {};
  for (const subresource of SUBRESOURCES) {
    for (const proxyType of ['proxied_to_kubelet', 'translated_at_apiserver', 'tunneled_at_apiserver']) {
      const n = counterValue(api, 'apiserver_websocket_streaming_requests_total', { subresource, proxy_type: proxyType });
      if (n > 0) out[`${name}/apiserver/${subresource}/${proxyType}`] = n;
    }
    const k = counterValue(kubelet, 'kubelet_websocket_streaming_requests_total', { subresource });
    if (k > 0) out[`${name}/kubelet/${subresource}`] = k;
  }
  byCode(api, 'apiserver_stream_translator_requests_total', `${name}/translator`, out);
  byCode(api, 'apiserver_stream_tunnel_requests_total', `${name}/tunnel`, out);
  return out;
}

/** The proxy's and every cluster's counters now. */
export async function waysOf(fx: { metrics(): Promise<string>; clusters: Record<string, DevCluster> }, o: { fallbacks?: boolean } = {}): Promise<Ways> {
  const out = proxyWays(await fx.metrics(), o);
  for (const [name, cluster] of Object.entries(fx.clusters)) Object.assign(out, clusterWays(name, cluster));
  return out;
}

/**
 * The kinds of cluster behind an agent the tunnel tests run against:
 * - `modern`: kube-apiserver and kubelet 1.36 (the dev cluster's default): the kubelet declares
 *   `ExtendWebSocketsToKubelet` and serves v5 and the tunnel itself; the proxy passes them through;
 * - `older-kubelet`: apiserver 1.36, kubelet 1.35 (`kubeletVersion: '1.35'`, the demo's `two-older`):
 *   the apiserver translates v5 and unwraps the tunnel itself; the proxy passes them through;
 * - `old-apiserver`: apiserver and kubelet 1.29 (`apiserverVersion: '1.29'`): v5 and the tunnel are
 *   refused before the 101, so the proxy falls back to its own translator and tunnel, the SPDY leg
 *   riding the agent's tunnel.
 */
export type ClusterKind = 'modern' | 'older-kubelet' | 'old-apiserver';

/** The dev cluster options of each {@link ClusterKind}. */
export const CLUSTER_KIND_OPTIONS: Record<ClusterKind, { apiserverVersion?: string; kubeletVersion?: string }> = {
  modern: {},
  'older-kubelet': { kubeletVersion: '1.35' },
  'old-apiserver': { apiserverVersion: '1.29' },
};

/**
 * What `n` kubectl ≥ 1.30 WebSocket sessions of `subresource` (v5 exec/attach, the port-forward
 * tunnel) move, through the proxy (`--upstream-streaming auto`) to cluster `name` of `kind`
 * (fallback counters left out: the first session to an `old-apiserver` cluster also counts one).
 * A SPDY session moves none of these counters.
 */
export function websocketWays(kind: ClusterKind, name: string, subresource: 'exec' | 'attach' | 'portforward', n: number): Ways {
  const pf = subresource === 'portforward';
  switch (kind) {
    case 'modern':
      return { [`proxy/${subresource}/proxied_to_upstream`]: n, [`${name}/apiserver/${subresource}/proxied_to_kubelet`]: n, [`${name}/kubelet/${subresource}`]: n };
    case 'older-kubelet':
      return pf
        ? { 'proxy/portforward/proxied_to_upstream': n, [`${name}/apiserver/portforward/tunneled_at_apiserver`]: n, [`${name}/tunnel/101`]: n }
        : { [`proxy/${subresource}/proxied_to_upstream`]: n, [`${name}/apiserver/${subresource}/translated_at_apiserver`]: n, [`${name}/translator/200`]: n };
    case 'old-apiserver':
      return pf ? { 'proxy/portforward/tunneled_at_apiserver': n, 'proxy/tunnel/101': n } : { [`proxy/${subresource}/translated_at_apiserver`]: n, 'proxy/translator/200': n };
  }
}

/** The sum of several {@link Ways} (the sessions of one test through several clusters). */
export function sumWays(...all: Ways[]): Ways {
  const out: Ways = {};
  for (const w of all) for (const [k, v] of Object.entries(w)) out[k] = (out[k] ?? 0) + v;
  return out;
}

/**
 * `kubectl cp POD:FILE DEST` exits as soon as it has read the end of the tar stream, without waiting
 * for the exec's Status; a translator (the proxy's, `proxy`, or a dev cluster's, `NAME`) whose
 * upstream has not yet ended that session then counts it as the client gone (code 500) rather than
 * 200. The bytes were all delivered (the tests compare sha256). This folds such 500s of `prefix`'s
 * translator into its 200s, and says how many there were, so a test can bound them (one download
 * per `kubectl cp`).
 */
export function foldEarlyClientExits(ways: Ways, prefix: string): { ways: Ways; clientGone: number } {
  const clientGone = ways[`${prefix}/translator/500`] ?? 0;
  if (clientGone === 0) return { ways, clientGone };
  const { [`${prefix}/translator/500`]: _gone, ...rest } = ways;
  return { ways: { ...rest, [`${prefix}/translator/200`]: (rest[`${prefix}/translator/200`] ?? 0) + clientGone }, clientGone };
}
