/**
 * The `kube-stream-proxy` command line: `serve`, `dev-cluster` and `demo`.
 *
 * Flags follow kube-apiserver's spelling (`--listen`, `--feature-gates`, …). Every subcommand prints
 * its own `--help`.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { startDevCluster } from './devcluster/dev-cluster.js';
import { writeKubeconfig } from './kubeconfig.js';
import { parseHostPort } from './listen-address.js';

const USAGE = `kube-stream-proxy: a Kubernetes API front proxy that serves exec, attach and port-forward
over WebSockets (v5.channel.k8s.io, SPDY/3.1+portforward.k8s.io) for upstreams that speak only SPDY.

Usage:
  kube-stream-proxy <command> [flags]

Commands:
  serve         Run the proxy in front of a kube-apiserver (arrives with the front-proxy work).
  dev-cluster   Run the embedded development cluster. WARNING: it runs local commands.
  demo          Run the dev cluster on loopback, write a kubeconfig and print a kubectl line to try.

Run 'kube-stream-proxy <command> --help' for a command's flags.
`;

const DEV_CLUSTER_USAGE = `kube-stream-proxy dev-cluster: an embedded development cluster for tests and demos.

It answers what kubectl needs of the core API (discovery, namespaces, pods) and serves pods/exec,
pods/attach and pods/portforward exactly as a kubelet behind a pre-1.30 kube-apiserver does:
SPDY/3.1 (v4, v3, v2, channel.k8s.io) and WebSocket (channel.k8s.io, base64.channel.k8s.io,
v4.channel.k8s.io, v4.base64.channel.k8s.io), no v5.

WARNING: exec and attach run REAL LOCAL PROCESSES as the current user (each pod's working directory
is its own folder), and port-forward connects to 127.0.0.1:<port> on this host. It listens on loopback
only unless --listen says otherwise; never expose it to a network you do not trust.

Usage:
  kube-stream-proxy dev-cluster [flags]

Flags:
  --listen HOST:PORT      Address to listen on (default 127.0.0.1:6444; port 0 picks a free port).
  --pod NAME              Add a pod in namespace "default" (repeatable; "demo" always exists).
  --data-dir DIR          Folder holding each pod's working directory (default: a new temp folder).
  --kubeconfig PATH       Write a kubeconfig for this cluster to PATH.
  -h, --help              Show this help.
`;

const DEMO_USAGE = `kube-stream-proxy demo: start the dev cluster on loopback, write a kubeconfig, print a line to try.

WARNING: the dev cluster runs real local processes as the current user.

Usage:
  kube-stream-proxy demo [flags]

Flags:
  --listen HOST:PORT      Dev cluster address (default 127.0.0.1:6444; loopback).
  --kubeconfig PATH       Where to write the kubeconfig (default ./.kube-stream-proxy/kubeconfig).
  -h, --help              Show this help.
`;

/** Run the CLI; resolves with the exit code, or never for long-running servers. */
export async function main(argv: string[]): Promise<number | void> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return 0;
    case 'dev-cluster':
      return devClusterCommand(rest);
    case 'demo':
      return demoCommand(rest);
    case 'serve':
      process.stderr.write('kube-stream-proxy serve: not available yet in this build\n');
      return 2;
    default:
      process.stderr.write(`kube-stream-proxy: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

async function devClusterCommand(argv: string[]): Promise<number | void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      listen: { type: 'string', default: '127.0.0.1:6444' },
      pod: { type: 'string', multiple: true, default: [] },
      'data-dir': { type: 'string' },
      kubeconfig: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(DEV_CLUSTER_USAGE);
    return 0;
  }
  const { host, port } = parseHostPort(values.listen);
  const cluster = await startDevCluster({
    host,
    port,
    pods: values.pod,
    dataDir: values['data-dir'],
  });
  if (values.kubeconfig) writeKubeconfig(resolve(values.kubeconfig), { server: cluster.url, name: 'dev-cluster' });
  process.stdout.write(`dev cluster listening on ${cluster.url} (runs local commands)\n`);
  installShutdown(() => cluster.close());
}

async function demoCommand(argv: string[]): Promise<number | void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      listen: { type: 'string', default: '127.0.0.1:6444' },
      kubeconfig: { type: 'string', default: '.kube-stream-proxy/kubeconfig' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(DEMO_USAGE);
    return 0;
  }
  const { host, port } = parseHostPort(values.listen);
  const cluster = await startDevCluster({ host, port });
  const kubeconfig = resolve(values.kubeconfig);
  writeKubeconfig(kubeconfig, { server: cluster.url, name: 'kube-stream-proxy-demo' });
  process.stdout.write(
    `dev cluster listening on ${cluster.url} (it runs local commands; loopback only)\n` +
      `kubeconfig written to ${kubeconfig}\n` +
      `try:\n  KUBECONFIG=${kubeconfig} kubectl exec -it demo -- sh\n`,
  );
  installShutdown(() => cluster.close());
}

function installShutdown(close: () => Promise<void>): void {
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
