/**
 * The Kubernetes versions the dev cluster plays — its kube-apiserver's (`--apiserver-version`) and its
 * kubelet's (`--kubelet-version`) — and what each does with WebSocket streaming (KEP-4006; the facts
 * and their sources are in the shared KUBELET-WEBSOCKETS notes, §2 and §5):
 *
 * | version | kube-apiserver                                                         | kubelet                                   |
 * |---------|------------------------------------------------------------------------|-------------------------------------------|
 * | ≤ 1.29  | passes every WebSocket to the kubelet (no translation)                 | SPDY and WebSocket v1–v4 only             |
 * | 1.30    | translates v5 exec/attach (TranslateStreamCloseWebsocketRequests beta); the port-forward tunnel goes to the kubelet (PortForwardWebsockets alpha, off) | same |
 * | 1.31–1.35 | translates v5 and unwraps the tunnel (PortForwardWebsockets beta)    | same                                      |
 * | ≥ 1.36  | passes v5 and the tunnel to a node that declares `ExtendWebSocketsToKubelet`, else as 1.35 | serves v5 and the tunnel itself and declares `ExtendWebSocketsToKubelet` (gate beta, on) |
 *
 * Versions are `1.N` (also `v1.N` or `v1.N.P`), from 1.20 to 1.38; the kubelet may not be newer than
 * the apiserver (Kubernetes' version skew policy).
 */

/** The minor version both play by default: the first with `ExtendWebSocketsToKubelet`. */
export const DEFAULT_MINOR = 36;
/** Oldest minor accepted (older ones stream no differently from 1.29). */
export const OLDEST_MINOR = 20;
/** Newest minor accepted (1.38: KEP-4006's planned GA, the gates locked on; streams as 1.36). */
export const NEWEST_MINOR = 38;

/** The string a kubelet that serves WebSockets itself puts in `Node.status.declaredFeatures`. */
export const EXTEND_WEBSOCKETS_TO_KUBELET = 'ExtendWebSocketsToKubelet';

/** The versions of one dev cluster, as minor numbers of 1.x. */
export interface ClusterVersions {
  apiserver: number;
  kubelet: number;
}

/** Parse `1.N`, `v1.N` or `v1.N.P` to N; throws an Error naming `what` otherwise. */
export function parseMinorVersion(text: string, what: string): number {
  const m = /^v?1\.(\d{1,2})(?:\.\d{1,3})?$/.exec(text.trim());
  const minor = m ? Number(m[1]) : NaN;
  if (!(minor >= OLDEST_MINOR && minor <= NEWEST_MINOR)) {
    throw new Error(`${what}: want a Kubernetes version 1.${OLDEST_MINOR} to 1.${NEWEST_MINOR} (e.g. 1.35 or v1.35.0), got ${JSON.stringify(text)}`);
  }
  return minor;
}

/**
 * The versions of a cluster from its options: the apiserver's (default {@link DEFAULT_MINOR}), the
 * kubelet's (default: the apiserver's). Throws when one is malformed or the kubelet is newer.
 */
export function clusterVersions(
  apiserver: string | undefined,
  kubelet: string | undefined,
  names: { apiserver: string; kubelet: string } = { apiserver: 'apiserverVersion', kubelet: 'kubeletVersion' },
): ClusterVersions {
  const api = apiserver === undefined ? DEFAULT_MINOR : parseMinorVersion(apiserver, names.apiserver);
  const node = kubelet === undefined ? api : parseMinorVersion(kubelet, names.kubelet);
  if (node > api) throw new Error(`${names.kubelet} 1.${node} is newer than ${names.apiserver} 1.${api}: a kubelet may not be newer than its kube-apiserver`);
  return { apiserver: api, kubelet: node };
}

/** `v1.N.0`, as `gitVersion` and `nodeInfo.kubeletVersion` show it. */
export function gitVersion(minor: number): string {
  return `v1.${minor}.0`;
}

/** A kubelet of this version serves v5 exec/attach and the port-forward tunnel and declares it. */
export function kubeletServesWebSockets(minor: number): boolean {
  return minor >= 36;
}

/** The node's `status.declaredFeatures` for a kubelet of this version (empty: the field is absent). */
export function declaredFeatures(kubeletMinor: number): string[] {
  return kubeletServesWebSockets(kubeletMinor) ? [EXTEND_WEBSOCKETS_TO_KUBELET] : [];
}

/** An apiserver of this version translates v5 (`exec`, `attach`) or unwraps the tunnel (`portforward`) itself. */
export function apiserverTranslates(minor: number, subresource: 'exec' | 'attach' | 'portforward'): boolean {
  return subresource === 'portforward' ? minor >= 31 : minor >= 30;
}

/** An apiserver of this version passes v5 and the tunnel to a node that declares {@link EXTEND_WEBSOCKETS_TO_KUBELET}. */
export function apiserverExtendsWebSocketsToKubelet(minor: number): boolean {
  return minor >= 36;
}
