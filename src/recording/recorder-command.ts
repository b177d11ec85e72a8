/**
 * `kube-stream-proxy recorder --listen HOST:PORT --dir D`: the remote session recorder
 * (`recorder-server.ts`). Flags are validated before anything starts; a bad one exits 2 naming it.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createProxyApiClient } from '../api-client.js';
import { parseCertificateBundle } from '../auth/client-certificate.js';
import { isLoopbackHost, parseGoDuration } from '../config.js';
import { parseHostPort } from '../listen-address.js';
import { KubernetesViewers, ReplicaAuth, TokenFileViewers, TokenTable, type ViewerAuth } from './recorder-auth.js';
import { startRecorder } from './recorder-server.js';
import { escapeTerminal } from './terminal-escape.js';

export const RECORDER_USAGE = `kube-stream-proxy recorder: stores the session recordings that proxy replicas stream to it
(serve --session-recorder-url), applies a retention age, and serves them: the JSON API that
'kube-stream-proxy sessions --recorder URL' reads, and the web page /sessions/ (list, player, live following).

Usage:
  kube-stream-proxy recorder --listen HOST:PORT --dir DIR [flags]

Flags:
  --listen HOST:PORT          Address (plain HTTP only on loopback; otherwise --tls-cert-file/--tls-private-key-file).
  --dir DIR                   Recordings directory (created 0700; files 0600).
  --retention DURATION        Delete recordings older than this (e.g. 720h; default 0 = keep).
  --tls-cert-file PATH        PEM serving certificate.
  --tls-private-key-file PATH Its key.
Replicas (who may upload):
  --ingest-token-file PATH    kube token-file CSV token,replica-name,uid: bearer tokens of the proxy replicas.
  --client-ca-file PATH       PEM CA: replicas may authenticate with a client certificate it issued (CN = replica).
Viewers (who may list and play):
  --viewer-token-file PATH    kube token-file CSV token,user,uid,"group1,group2": viewer bearer tokens;
                              authorized by --viewer-group only.
  --kubeconfig PATH           Review viewers with this cluster instead: TokenReview, then SubjectAccessReview
                              on resource sessions.recording.kube-stream-proxy.io (list; get <id> in the
                              recording's namespace; an agent cluster's recordings as subresource
                              sessions/CLUSTER), or --viewer-group.
  --in-cluster                The same with the pod's service account.
  --viewer-group G            Members may view every recording (repeatable).
  -h, --help                  Show this help.
`;

/** Run `recorder`; resolves with an exit code on a flag error, never when running. */
export async function recorderCommand(argv: string[]): Promise<number | void> {
  const fail = (msg: string): number => {
    process.stderr.write(`${escapeTerminal(`kube-stream-proxy recorder: ${msg}`)}\n`);
    return 2;
  };
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string' },
        dir: { type: 'string' },
        retention: { type: 'string' },
        'tls-cert-file': { type: 'string' },
        'tls-private-key-file': { type: 'string' },
        'ingest-token-file': { type: 'string' },
        'client-ca-file': { type: 'string' },
        'viewer-token-file': { type: 'string' },
        kubeconfig: { type: 'string' },
        'in-cluster': { type: 'boolean', default: false },
        'viewer-group': { type: 'string', multiple: true, default: [] },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    }));
  } catch (e) {
    process.stderr.write(`${escapeTerminal(`kube-stream-proxy recorder: ${(e as Error).message}`)}\n\n${RECORDER_USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(RECORDER_USAGE);
    return 0;
  }
  if (values.listen === undefined) return fail('--listen is required');
  if (values.dir === undefined) return fail('--dir is required');
  let host: string;
  let port: number;
  try {
    ({ host, port } = parseHostPort(values.listen));
  } catch (e) {
    return fail(`--listen: ${(e as Error).message}`);
  }
  const certFile = values['tls-cert-file'];
  const keyFile = values['tls-private-key-file'];
  if ((certFile === undefined) !== (keyFile === undefined)) return fail('--tls-cert-file and --tls-private-key-file must be given together');
  if (certFile === undefined && !isLoopbackHost(host)) return fail(`--listen ${values.listen}: plain HTTP is only allowed on loopback; give --tls-cert-file and --tls-private-key-file`);
  let retentionMs = 0;
  try {
    if (values.retention !== undefined) retentionMs = parseGoDuration(values.retention);
  } catch (e) {
    return fail(`--retention: ${(e as Error).message}`);
  }
  const read = (flag: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (e) {
      throw new Error(`${flag}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };
  let viewers: ViewerAuth;
  let replicas: ReplicaAuth;
  let tls;
  try {
    if (values['ingest-token-file'] === undefined && values['client-ca-file'] === undefined) throw new Error('replicas need --ingest-token-file or --client-ca-file');
    if (values['client-ca-file'] !== undefined && certFile === undefined) throw new Error('--client-ca-file needs HTTPS (--tls-cert-file)');
    const clientCa = values['client-ca-file'] !== undefined ? parseCertificateBundle(read('--client-ca-file', values['client-ca-file'])) : undefined;
    const ingest = values['ingest-token-file'] !== undefined ? new TokenTable(read('--ingest-token-file', values['ingest-token-file']).toString(), values['ingest-token-file']) : undefined;
    replicas = new ReplicaAuth(ingest, clientCa);
    const modes = [values['viewer-token-file'] !== undefined, values.kubeconfig !== undefined || values['in-cluster']].filter(Boolean).length;
    if (modes !== 1) throw new Error('viewers need exactly one of --viewer-token-file, or --kubeconfig/--in-cluster');
    if (values['viewer-token-file'] !== undefined) {
      if (values['viewer-group'].length === 0) throw new Error('--viewer-token-file needs --viewer-group (who may view)');
      viewers = new TokenFileViewers(new TokenTable(read('--viewer-token-file', values['viewer-token-file']).toString(), values['viewer-token-file']), values['viewer-group']);
    } else {
      const { KubeConfig } = await import('@kubernetes/client-node');
      const kc = new KubeConfig();
      if (values['in-cluster']) kc.loadFromCluster();
      else kc.loadFromFile(resolve(values.kubeconfig!));
      viewers = new KubernetesViewers(createProxyApiClient(async () => kc), values['viewer-group'], clientCa);
    }
    if (certFile !== undefined) {
      tls = {
        cert: read('--tls-cert-file', certFile),
        key: read('--tls-private-key-file', keyFile!),
        ...(values['client-ca-file'] !== undefined ? { ca: read('--client-ca-file', values['client-ca-file']), requestCert: true } : {}),
      };
    }
  } catch (e) {
    return fail((e as Error).message);
  }
  const recorder = await startRecorder({
    dir: resolve(values.dir),
    host,
    port,
    ...(tls ? { tls } : {}),
    viewers,
    replicas,
    retentionMs,
    log: { info: (m) => process.stderr.write(`${escapeTerminal(m)}\n`), warn: (m) => process.stderr.write(`${escapeTerminal(m)}\n`) },
  });
  process.stdout.write(`kube-stream-proxy recorder listening on ${recorder.url}, recordings in ${resolve(values.dir)}\n`);
  const stop = (): void => {
    void recorder.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
