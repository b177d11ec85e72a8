/**
 * The exec credential plugin protocol of kubectl (client-go `pkg/apis/clientauthentication`):
 * `KUBERNETES_EXEC_INFO` in (an `ExecCredential` with `apiVersion` and `spec.interactive`), one
 * `ExecCredential` with `status.token` and `status.expirationTimestamp` out on stdout, under the same
 * `apiVersion` kubectl asked for (client-go refuses a different one).
 */

/** The versions a kubeconfig's `exec.apiVersion` may name. */
export const EXEC_CREDENTIAL_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;

/** What kubectl tells the plugin. */
export interface ExecInfo {
  apiVersion: string;
  /** Whether kubectl handed its stdin to the plugin (`interactiveMode`). */
  interactive: boolean;
}

/** Read `KUBERNETES_EXEC_INFO`; absent means a manual run (answered as v1). Throws on a bad value. */
export function readExecInfo(env: NodeJS.ProcessEnv): ExecInfo {
  const raw = env.KUBERNETES_EXEC_INFO;
  if (raw === undefined || raw === '') return { apiVersion: EXEC_CREDENTIAL_VERSIONS[0], interactive: false };
  let v: { apiVersion?: unknown; kind?: unknown; spec?: { interactive?: unknown } };
  try {
    v = JSON.parse(raw) as typeof v;
  } catch {
    throw new Error('KUBERNETES_EXEC_INFO is not JSON');
  }
  if (v.kind !== 'ExecCredential' || typeof v.apiVersion !== 'string' || !(EXEC_CREDENTIAL_VERSIONS as readonly string[]).includes(v.apiVersion)) {
    throw new Error(`KUBERNETES_EXEC_INFO: unsupported ExecCredential apiVersion ${JSON.stringify(v.apiVersion)} (want one of ${EXEC_CREDENTIAL_VERSIONS.join(', ')})`);
  }
  return { apiVersion: v.apiVersion, interactive: v.spec?.interactive === true };
}

/** RFC 3339 in UTC without fractional seconds (`metav1.Time`'s form). */
export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** The ExecCredential JSON (one line and a newline) kubectl reads from the plugin's stdout. */
export function execCredential(info: ExecInfo, token: string, expiresAtMs: number | undefined): string {
  const status: Record<string, string> = { token };
  if (expiresAtMs !== undefined) status.expirationTimestamp = rfc3339(expiresAtMs);
  return `${JSON.stringify({ kind: 'ExecCredential', apiVersion: info.apiVersion, spec: { interactive: info.interactive }, status })}\n`;
}

/** `exp` of a JWT in milliseconds, read without verification (the provider's answer is trusted over TLS); undefined if absent or not a JWT. */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
