/**
 * The JWT authenticator's and the authentication-config controller's metrics, under kube-apiserver's
 * names and labels (`plugin/pkg/authenticator/token/oidc/metrics.go`,
 * `pkg/server/options/authenticationconfig/metrics/metrics.go`) so existing dashboards work, plus one
 * counter of this proxy's own. Hash labels are kube-apiserver's `getHash`: `sha256:<hex>` of the
 * string, `""` for an empty one. One instance per server Registry (as `src/metrics.ts` does).
 */
import { createHash } from 'node:crypto';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { METRICS_NAMESPACE } from '../metrics.js';

/** kube-apiserver's default histogram buckets with a 1 ms start. */
export const JWT_LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** `sha256:<lowercase hex>` of `data`, or `""` for `""` (kube-apiserver's `getHash`). */
export function kubeHash(data: string): string {
  return data === '' ? '' : `sha256:${createHash('sha256').update(data, 'utf8').digest('hex')}`;
}

/** Outcome label of the JWT metrics. */
export type JwtResult = 'success' | 'failure';

/** The operations the authenticator and the config watcher call. */
export interface JwtMetrics {
  /** `apiserver_authentication_jwt_authenticator_latency_seconds`: one cache-miss authentication for a matched issuer. */
  observeAuthentication(issuer: string, result: JwtResult, seconds: number): void;
  /**
   * A fetch of the issuer's discovered `jwks_uri` ended: the timestamp gauge, the key-set info (on
   * success, `body` is the raw JWKS), and `kube_stream_proxy_jwt_authenticator_jwks_fetches_total`.
   */
  recordJwksFetch(issuer: string, result: JwtResult, body?: string): void;
  /** Forget an issuer's key-set info (its authenticator was removed by a reload). */
  deleteIssuer(issuer: string): void;
  /** `apiserver_authentication_config_controller_automatic_reloads_total` and its timestamp gauge. */
  recordConfigReload(status: JwtResult): void;
  /** `apiserver_authentication_config_controller_last_config_info{hash}`: the configuration in force. */
  setConfigInfo(configData: string): void;
}

/** Options of {@link createJwtMetrics}. */
export interface JwtMetricsOptions {
  /** This server's identity (kube-apiserver's `apiserver_id_hash` is the hash of its ID). */
  apiserverId: string;
  /** Clock for the timestamp gauges (tests), in milliseconds. */
  now?: () => number;
}

/** Register the JWT metrics on `registry` and return their operations. */
export function createJwtMetrics(registry: Registry, options: JwtMetricsOptions): JwtMetrics {
  const now = options.now ?? Date.now;
  const apiserverIdHash = kubeHash(options.apiserverId);
  const latency = new Histogram({
    name: 'apiserver_authentication_jwt_authenticator_latency_seconds',
    help: 'Latency of jwt authentication operations in seconds. This is the time spent authenticating a token for cache miss only (i.e. when the token is not found in the cache).',
    labelNames: ['result', 'jwt_issuer_hash'] as const,
    buckets: JWT_LATENCY_BUCKETS,
    registers: [registry],
  });
  const jwksLast = new Gauge({
    name: 'apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds',
    help: 'Timestamp of the last successful or failed JWKS fetch split by result, api server identity and jwt issuer for the JWT authenticator.',
    labelNames: ['result', 'jwt_issuer_hash', 'apiserver_id_hash'] as const,
    registers: [registry],
  });
  const keySetInfo = new Gauge({
    name: 'apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info',
    help: 'Information about the last JWKS fetched by the JWT authenticator with hash as label, split by api server identity and jwt issuer.',
    labelNames: ['jwt_issuer_hash', 'apiserver_id_hash', 'hash'] as const,
    registers: [registry],
  });
  const jwksFetches = new Counter({
    name: `${METRICS_NAMESPACE}_jwt_authenticator_jwks_fetches_total`,
    help: "Fetches of a JWT issuer's JWKS (jwks_uri), by result and issuer hash: the initial fetch, the periodic refresh and the rate-limited refresh for an unknown key.",
    labelNames: ['result', 'jwt_issuer_hash'] as const,
    registers: [registry],
  });
  const reloads = new Counter({
    name: 'apiserver_authentication_config_controller_automatic_reloads_total',
    help: 'Total number of automatic reloads of authentication configuration split by status and apiserver identity.',
    labelNames: ['status', 'apiserver_id_hash'] as const,
    registers: [registry],
  });
  const reloadLast = new Gauge({
    name: 'apiserver_authentication_config_controller_automatic_reload_last_timestamp_seconds',
    help: 'Timestamp of the last automatic reload of authentication configuration split by status and apiserver identity.',
    labelNames: ['status', 'apiserver_id_hash'] as const,
    registers: [registry],
  });
  const configInfo = new Gauge({
    name: 'apiserver_authentication_config_controller_last_config_info',
    help: 'Information about the last applied authentication configuration with hash as label, split by apiserver identity.',
    labelNames: ['apiserver_id_hash', 'hash'] as const,
    registers: [registry],
  });
  /** The key-set hash currently exported per issuer hash (one series each). */
  const keySetHashes = new Map<string, string>();
  let configHash: string | undefined;
  return {
    observeAuthentication: (issuer, result, seconds) => latency.observe({ result, jwt_issuer_hash: kubeHash(issuer) }, seconds),
    recordJwksFetch: (issuer, result, body) => {
      const issuerHash = kubeHash(issuer);
      jwksLast.set({ result, jwt_issuer_hash: issuerHash, apiserver_id_hash: apiserverIdHash }, now() / 1000);
      jwksFetches.inc({ result, jwt_issuer_hash: issuerHash });
      if (result === 'success' && body !== undefined) {
        const hash = kubeHash(body);
        const old = keySetHashes.get(issuerHash);
        if (old !== undefined && old !== hash) keySetInfo.remove({ jwt_issuer_hash: issuerHash, apiserver_id_hash: apiserverIdHash, hash: old });
        keySetHashes.set(issuerHash, hash);
        keySetInfo.set({ jwt_issuer_hash: issuerHash, apiserver_id_hash: apiserverIdHash, hash }, 1);
      }
    },
    deleteIssuer: (issuer) => {
      const issuerHash = kubeHash(issuer);
      const old = keySetHashes.get(issuerHash);
      if (old !== undefined) keySetInfo.remove({ jwt_issuer_hash: issuerHash, apiserver_id_hash: apiserverIdHash, hash: old });
      keySetHashes.delete(issuerHash);
    },
    recordConfigReload: (status) => {
      reloads.inc({ status, apiserver_id_hash: apiserverIdHash });
      reloadLast.set({ status, apiserver_id_hash: apiserverIdHash }, now() / 1000);
    },
    setConfigInfo: (configData) => {
      const hash = kubeHash(configData);
      if (configHash !== undefined && configHash !== hash) configInfo.remove({ apiserver_id_hash: apiserverIdHash, hash: configHash });
      configHash = hash;
      configInfo.set({ apiserver_id_hash: apiserverIdHash, hash }, 1);
    },
  };
}
