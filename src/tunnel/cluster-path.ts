/**
 * The `/clusters/NAME/…` path prefix by which clients address a cluster behind an agent
 * (kubeconfig `server: https://proxy:6443/clusters/NAME`; kubectl keeps a server's path prefix on
 * every request, streaming included).
 *
 * Fastify's `rewriteUrl` (src/server.ts) strips the prefix before routing, so the pod
 * exec/attach/portforward routes match unchanged, and remembers the cluster on the raw request for
 * the {@link ClusterResolver}. A path the proxy serves itself (`/healthz`, `/metrics`) keeps its
 * prefix so that it reaches the cluster, not the proxy; the tunnel route strips it then.
 */
import type { IncomingMessage } from 'node:http';
import { isValidClusterName } from './protocol.js';

/** The path segment before the cluster name. */
export const CLUSTERS_PREFIX = '/clusters/';

/** A request-target split into its cluster and the rest. */
export interface ClusterTarget {
  cluster: string;
  /** The request-target without the prefix, always starting with `/` (`/clusters/a` → `/`). */
  rest: string;
}

/**
 * Split `/clusters/NAME[/…][?query]`; undefined for every other target, including an invalid or
 * percent-encoded name (not a cluster anyone can register). Pure.
 */
export function splitClusterTarget(url: string): ClusterTarget | undefined {
  if (!url.startsWith(CLUSTERS_PREFIX)) return undefined;
  const after = url.slice(CLUSTERS_PREFIX.length);
  const end = after.search(/[/?]/);
  const cluster = end < 0 ? after : after.slice(0, end);
  if (!isValidClusterName(cluster)) return undefined;
  const tail = end < 0 ? '' : after.slice(end);
  return { cluster, rest: tail.startsWith('/') ? tail : `/${tail}` };
}

const clusters = new WeakMap<IncomingMessage, string>();

/** The cluster `req` addressed by its path prefix, or undefined. */
export function clusterOf(req: IncomingMessage): string | undefined {
  return clusters.get(req);
}

/**
 * Fastify's `rewriteUrl`: remember the cluster of a `/clusters/NAME/…` request and return the
 * target without the prefix; other requests are left as they are. `ownPaths` (served by the proxy
 * itself) keep the prefix, so they are routed to the cluster by the catch-all instead.
 */
export function rewriteClusterUrl(req: IncomingMessage, ownPaths: readonly string[]): string {
  const url = req.url ?? '/';
  const target = splitClusterTarget(url);
  if (!target) return url;
  clusters.set(req, target.cluster);
  const path = target.rest.split('?')[0] ?? '/';
  return ownPaths.includes(path) ? url : target.rest;
}

/** The request-target to send through the cluster's tunnel: the prefix removed if still there. */
export function targetInCluster(url: string): string {
  return splitClusterTarget(url)?.rest ?? url;
}
