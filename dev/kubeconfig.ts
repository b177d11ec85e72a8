/**
 * Writing a kubeconfig that points kubectl at a server we run (the dev cluster or the proxy).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** What a generated kubeconfig needs. */
export interface KubeconfigOptions {
  /** `https://…` or `http://…` URL of the server kubectl talks to. */
  server: string;
  /** Context, cluster and user name. */
  name?: string;
  /** Default namespace of the context. */
  namespace?: string;
  /** Bearer token, if the server wants one. */
  token?: string;
  /** PEM CA bundle for an https server (inlined as certificate-authority-data). */
  caPem?: string;
  /** Skip TLS verification (only for loopback development). */
  insecureSkipTlsVerify?: boolean;
  /** PEM client certificate and key (inlined as client-certificate-data / client-key-data). */
  clientCertPem?: string;
  clientKeyPem?: string;
  /** A client-go exec credential plugin (`users[].user.exec`: apiVersion, command, args, interactiveMode…). */
  exec?: Record<string, unknown>;
}

/** One context's cluster and user entries (named `o.name`). */
function entries(o: KubeconfigOptions): { name: string; cluster: Record<string, unknown>; user: Record<string, unknown>; namespace: string } {
  const cluster: Record<string, unknown> = { server: o.server };
  if (o.caPem) cluster['certificate-authority-data'] = Buffer.from(o.caPem).toString('base64');
  if (o.insecureSkipTlsVerify) cluster['insecure-skip-tls-verify'] = true;
  const user: Record<string, unknown> = {};
  if (o.token) user.token = o.token;
  if (o.clientCertPem) user['client-certificate-data'] = Buffer.from(o.clientCertPem).toString('base64');
  if (o.clientKeyPem) user['client-key-data'] = Buffer.from(o.clientKeyPem).toString('base64');
  if (o.exec) user.exec = o.exec;
  return { name: o.name ?? 'kube-stream-proxy', cluster, user, namespace: o.namespace ?? 'default' };
}

/**
 * Render a kubeconfig as YAML (JSON is valid YAML and needs no library). Several options give one
 * context each (cluster, user and context share its `name`, which must differ); the first is the
 * current context.
 */
export function renderKubeconfig(o: KubeconfigOptions | readonly KubeconfigOptions[]): string {
  const all = (Array.isArray(o) ? o : [o]).map(entries);
  if (all.length === 0) throw new Error('renderKubeconfig: no context');
  const names = all.map((e) => e.name);
  if (new Set(names).size !== names.length) throw new Error(`renderKubeconfig: context names repeat: ${names.join(', ')}`);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: all.map((e) => ({ name: e.name, cluster: e.cluster })),
    users: all.map((e) => ({ name: e.name, user: e.user })),
    contexts: all.map((e) => ({ name: e.name, context: { cluster: e.name, user: e.name, namespace: e.namespace } })),
    'current-context': all[0]!.name,
    preferences: {},
  };
  return JSON.stringify(config, null, 2) + '\n';
}

/** Write a kubeconfig file (mode 0600, parent folders created); several options give one context each. */
export function writeKubeconfig(path: string, o: KubeconfigOptions | readonly KubeconfigOptions[]): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, renderKubeconfig(o), { mode: 0o600 });
}
