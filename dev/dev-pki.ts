/**
 * A development PKI made with the `openssl` CLI (OpenSSL 3: `req -x509 -CA` signs in one step), for
 * the tests and for `demo` (the aggregated metrics backend's serving and front-proxy certificates):
 * a CA, a server certificate for loopback (`IP:127.0.0.1,DNS:localhost`) and client certificates
 * whose CN is the user and whose O entries are the groups, as kube-apiserver and the kubelet read
 * them. Keys are EC P-256 (fast), certificates valid for 30 days. Every file is written into the
 * given folder. Never for production: the CA key sits beside the certificates.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The openssl binary (override with $OPENSSL). */
export const OPENSSL = process.env.OPENSSL ?? '/usr/bin/openssl';

/** A certificate and its key, as PEM buffers and as the files holding them. */
export interface CertAndKey {
  cert: Buffer;
  key: Buffer;
  certFile: string;
  keyFile: string;
}

/** What {@link createClientCert} puts in the subject. */
export interface ClientCertOptions {
  /** File name stem (default: the CN with unsafe characters replaced). */
  name?: string;
  /** Common name: the user name. */
  cn: string;
  /** Organization entries: the groups. */
  groups?: string[];
}

/** A whole test PKI: CA, loopback server certificate, client certificates by name. */
export interface TestPki {
  ca: CertAndKey;
  server: CertAndKey;
  clients: Record<string, CertAndKey>;
}

/** One `-subj` value: `/O=a/O=b/CN=x`, with `/` and `\` escaped as openssl wants. */
export function subjectArg(cn: string, organizations: readonly string[] = []): string {
  const esc = (v: string): string => v.replace(/[\\/]/g, (c) => `\\${c}`);
  return organizations.map((o) => `/O=${esc(o)}`).join('') + `/CN=${esc(cn)}`;
}

/** A minimal openssl config with one extensions section (so no distro defaults sneak in). */
function writeConfig(dir: string, stem: string, extensions: string[]): string {
  const file = join(dir, `${stem}.cnf`);
  writeFileSync(
    file,
    ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', 'CN = placeholder', '[ext]', ...extensions, ''].join('\n'),
  );
  return file;
}

async function issue(
  dir: string,
  stem: string,
  subject: string,
  extensions: string[],
  signer?: CertAndKey,
): Promise<CertAndKey> {
  const certFile = join(dir, `${stem}.crt`);
  const keyFile = join(dir, `${stem}.key`);
  const config = writeConfig(dir, stem, extensions);
  const args = [
    'req', '-x509', '-new',
    '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-keyout', keyFile, '-out', certFile,
    '-days', '30', '-subj', subject,
    '-config', config, '-extensions', 'ext',
  ];
  if (signer) args.push('-CA', signer.certFile, '-CAkey', signer.keyFile);
  await run(OPENSSL, args);
  return { cert: readFileSync(certFile), key: readFileSync(keyFile), certFile, keyFile };
}

/** A self-signed CA (`ca.crt`, `ca.key`). */
export function createCa(dir: string, cn = 'kube-stream-proxy test CA', stem = 'ca'): Promise<CertAndKey> {
  return issue(dir, stem, subjectArg(cn), [
    'basicConstraints = critical, CA:TRUE',
    'keyUsage = critical, keyCertSign, cRLSign, digitalSignature',
    'subjectKeyIdentifier = hash',
  ]);
}

/** A server certificate issued by `ca`, SAN `IP:127.0.0.1,DNS:localhost` unless `san` says otherwise. */
export function createServerCert(
  dir: string,
  ca: CertAndKey,
  o: { stem?: string; cn?: string; san?: string } = {},
): Promise<CertAndKey> {
  return issue(dir, o.stem ?? 'server', subjectArg(o.cn ?? 'localhost'), [
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature, keyEncipherment',
    'extendedKeyUsage = serverAuth',
    `subjectAltName = ${o.san ?? 'IP:127.0.0.1,DNS:localhost'}`,
    'authorityKeyIdentifier = keyid',
  ], ca);
}

/** A client certificate issued by `ca`: CN = user, O = each group. */
export function createClientCert(dir: string, ca: CertAndKey, o: ClientCertOptions): Promise<CertAndKey> {
  const stem = o.name ?? `client-${o.cn.replace(/[^A-Za-z0-9._-]/g, '_')}`;
  return issue(dir, stem, subjectArg(o.cn, o.groups), [
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature, keyEncipherment',
    'extendedKeyUsage = clientAuth',
    'authorityKeyIdentifier = keyid',
  ], ca);
}

/** CA + loopback server certificate + the named client certificates, all in `dir`. */
export async function createTestPki(dir: string, clients: Record<string, Omit<ClientCertOptions, 'name'>> = {}): Promise<TestPki> {
  const ca = await createCa(dir);
  const [server, ...issued] = await Promise.all([
    createServerCert(dir, ca),
    ...Object.entries(clients).map(([name, c]) => createClientCert(dir, ca, { ...c, name })),
  ]);
  const names = Object.keys(clients);
  return { ca, server: server!, clients: Object.fromEntries(issued.map((c, i) => [names[i]!, c])) };
}
