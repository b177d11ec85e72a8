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
}

/** Render a kubeconfig as YAML (JSON is valid YAML and needs no library). */
export function renderKubeconfig(o: KubeconfigOptions): string {
  const name = o.name ?? 'kube-stream-proxy';
  const cluster: Record<string, unknown> = { server: o.server };
  if (o.caPem) cluster['certificate-authority-data'] = Buffer.from(o.caPem).toString('base64');
  if (o.insecureSkipTlsVerify) cluster['insecure-skip-tls-verify'] = true;
  const user: Record<string, unknown> = {};
  if (o.token) user.token = o.token;
  if (o.clientCertPem) user['client-certificate-data'] = Buffer.from(o.clientCertPem).toString('base64');
  if (o.clientKeyPem) user['client-key-data'] = Buffer.from(o.clientKeyPem).toString('base64');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name, namespace: o.namespace ?? 'default' } }],
    'current-context': name,
    preferences: {},
  };
  return JSON.stringify(config, null, 2) + '\n';
}

/** Write a kubeconfig file (mode 0600, parent folders created). */
export function writeKubeconfig(path: string, o: KubeconfigOptions): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, renderKubeconfig(o), { mode: 0o600 });
}
