/**
 * Agent authentication by client certificate (`serve --agent-client-ca-file`), as kube-apiserver's
 * `--client-ca-file` does it for users: a certificate that chains to the CA bundle, is within its
 * validity period and allows client authentication (extended key usage `clientAuth`, or none given)
 * identifies the agent by its subject CN, which must be the cluster it claims.
 */
import type { TLSSocket } from 'node:tls';

/** OID of the `clientAuth` extended key usage. */
const EKU_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

/** What a TLS connection's client certificate says about the agent. */
export type ClientCertificateIdentity =
  | { kind: 'none' }
  | { kind: 'unverified'; reason: string }
  | { kind: 'verified'; commonName: string };

/** Read the identity of the client certificate `socket` was given (verified by the server's `ca`). */
export function clientCertificateIdentity(socket: TLSSocket): ClientCertificateIdentity {
  if (typeof socket.getPeerCertificate !== 'function') return { kind: 'none' };
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return { kind: 'none' };
  if (!socket.authorized) return { kind: 'unverified', reason: `${socket.authorizationError ?? 'not verified'} (verified against --agent-client-ca-file)` };
  const eku = (cert as { ext_key_usage?: string[] }).ext_key_usage;
  if (eku && eku.length > 0 && !eku.includes(EKU_CLIENT_AUTH)) return { kind: 'unverified', reason: 'the certificate does not allow client authentication (extended key usage)' };
  const cn = cert.subject?.CN;
  const commonName = Array.isArray(cn) ? cn[0] : cn;
  if (typeof commonName !== 'string' || commonName === '') return { kind: 'unverified', reason: 'the certificate has no subject CN' };
  return { kind: 'verified', commonName };
}
