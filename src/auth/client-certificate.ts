/**
 * Client certificates on the listener: which trusted CA bundle a verified peer chain leads to, and
 * the user a client certificate names (kube-apiserver's x509 authenticator: CommonName is the user,
 * each Organization a group).
 *
 * The listener asks for a certificate (`requestCert`) and lets the TLS layer verify the chain
 * against every trusted bundle at once (`--client-ca-file` and `--requestheader-client-ca-file`);
 * this module then tells which bundle that was, so a certificate from the client CA can never pass
 * as a front proxy.
 */
import { X509Certificate } from 'node:crypto';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import type { UserInfo } from './user-info.js';

/** Split a PEM bundle into certificates (throws on garbage). */
export function parseCertificateBundle(pem: Buffer | string): X509Certificate[] {
  const text = pem.toString();
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate found');
  return blocks.map((b) => new X509Certificate(b));
}

/** True when `cert` is `ca` or was signed by it. */
function issuedBy(cert: X509Certificate, ca: X509Certificate): boolean {
  if (cert.fingerprint256 === ca.fingerprint256) return true;
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

/**
 * The peer's certificate chain, leaf first, as the TLS handshake presented it (empty without one).
 * Node links the chain through `issuerCertificate`, ending on a self-reference.
 */
export function peerChain(socket: TLSSocket): X509Certificate[] {
  const out: X509Certificate[] = [];
  let cert: PeerCertificate & { issuerCertificate?: PeerCertificate } = socket.getPeerCertificate(true) as PeerCertificate & { issuerCertificate?: PeerCertificate };
  const seen = new Set<string>();
  while (cert && cert.raw && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    out.push(new X509Certificate(cert.raw));
    cert = cert.issuerCertificate as typeof cert;
  }
  return out;
}

/** True when the peer presented a certificate in the handshake (verified or not). */
export function hasPeerCertificate(socket: TLSSocket): boolean {
  return Boolean(socket.getPeerCertificate()?.raw);
}

/**
 * The verified leaf certificate when the handshake accepted the peer's chain AND that chain leads to
 * a certificate in `bundle`; otherwise undefined.
 */
export function verifiedAgainst(socket: TLSSocket, bundle: readonly X509Certificate[]): X509Certificate | undefined {
  if (!socket.authorized) return undefined;
  const chain = peerChain(socket);
  const leaf = chain[0];
  if (!leaf) return undefined;
  return chain.some((c) => bundle.some((ca) => issuedBy(c, ca))) ? leaf : undefined;
}

/** Values of one attribute (`CN`, `O`) in an X.509 subject as Node prints it (one `K=V` per line). */
export function subjectValues(subject: string, key: string): string[] {
  const out: string[] = [];
  for (const line of subject.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0 && line.slice(0, at) === key) out.push(line.slice(at + 1));
  }
  return out;
}

/** The user of a client certificate: CommonName, Organizations as groups; undefined without a CN. */
export function userFromCertificate(cert: X509Certificate): UserInfo | undefined {
  const username = subjectValues(cert.subject, 'CN')[0];
  if (username === undefined || username === '') return undefined;
  return { username, groups: subjectValues(cert.subject, 'O'), extra: {} };
}
