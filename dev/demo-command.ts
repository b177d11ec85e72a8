/**
 * `kube-stream-proxy demo`: its flags, and the demo (dev/demo.ts) started and shut down on a signal.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_SHUTDOWN_GRACE_PERIOD } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { heapFloorLogFields } from '../src/heap-floor.js';
import { loggerOptions, parseLogging } from '../src/log-format.js';
import { installShutdown } from '../src/process-shutdown.js';
import { DEMO_MAX_CLUSTERS, parseDemoClusters, runDemo, type DemoOptions } from './demo.js';

export const DEMO_USAGE = `kube-stream-proxy demo: the dev cluster and the proxy in front of it, on loopback.

Starts the embedded dev cluster (kube-apiserver and kubelet 1.36 look-alikes: the kubelet serves
WebSocket exec/attach and the port-forward tunnel itself and declares ExtendWebSocketsToKubelet),
starts the proxy with the dev cluster as its upstream, writes a kubeconfig that points kubectl at the
PROXY, and prints the lines to try (how to see which way a session went among them).

With --clusters N: N dev clusters behind agents instead (docs/agent.md), modern and older in turn:
"one-modern" (kubelet 1.36: its apiserver passes WebSockets to it) has the pods demo and alpha,
"two-older" (kubelet 1.35: its apiserver translates WebSockets to SPDY) demo and beta, and so on; each
gets an agent (in this process) that dials the proxy's agent listener with its own token, and the
kubeconfig gets one context per cluster (server: <proxy>/clusters/NAME; the first is current). No
direct upstream and no dev-metrics then.

With --oidc: single sign-on. A real OpenID Provider (npm oidc-provider) on loopback with a demo user
and a sign-in page; the proxy in --authn impersonate over HTTPS with an AuthenticationConfiguration for
it; the dev clusters with token authentication; a kubeconfig whose user runs kube-stream-proxy login
(device code: open the URL it prints, sign in, allow). With --clusters N, one login for every context.

WARNING: the dev clusters run real local processes as the current user.

Usage:
  kube-stream-proxy demo [flags]

Flags:
  --listen HOST:PORT              Proxy address (default 127.0.0.1:6443; loopback).
  --dev-cluster-listen HOST:PORT  Dev cluster address (default 127.0.0.1:0: a free port; with --clusters,
                                  port P gives P, P+1, ...).
  --clusters N                    N clusters (1-${DEMO_MAX_CLUSTERS}) behind agents, one kubeconfig context each.
  --agent-listen HOST:PORT        The proxy's agent listener with --clusters (default 127.0.0.1:0; loopback).
  --feature-gates A=true,B=false  Proxy feature gates (as for serve).
  --oidc                          Single sign-on with a demo OpenID Provider (above); oidc/ next to the kubeconfig.
  --kubeconfig PATH               Where to write the kubeconfig (default ./.kube-stream-proxy/kubeconfig);
                                  with --clusters the agent tokens go to agents/ next to it.
  --shutdown-grace-period DURATION  As for serve (default ${DEFAULT_SHUTDOWN_GRACE_PERIOD}).
  --logging-format text|json      Log lines for people (the default on a terminal) or JSON lines (elsewhere);
                                  --log-format is the same flag.
  --log-level LEVEL               trace, debug, info (default), warn, error, fatal or silent.
  -h, --help                      Show this help.
`;

/** Run `demo` with its flags. */
export async function demoCommand(argv: string[]): Promise<number | void> {
  let options: DemoOptions;
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string', default: '127.0.0.1:6443' },
        'dev-cluster-listen': { type: 'string', default: '127.0.0.1:0' },
        'feature-gates': { type: 'string' },
        'shutdown-grace-period': { type: 'string' },
        kubeconfig: { type: 'string', default: '.kube-stream-proxy/kubeconfig' },
        clusters: { type: 'string' },
        'agent-listen': { type: 'string' },
        oidc: { type: 'boolean', default: false },
        'logging-format': { type: 'string' },
        'log-format': { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(DEMO_USAGE);
      return 0;
    }
    options = {
      listen: values.listen,
      devClusterListen: values['dev-cluster-listen'],
      kubeconfig: resolve(values.kubeconfig),
      ...(values['feature-gates'] !== undefined ? { featureGates: values['feature-gates'] } : {}),
      ...(values['shutdown-grace-period'] !== undefined ? { shutdownGracePeriod: values['shutdown-grace-period'] } : {}),
      ...(values.clusters !== undefined ? { clusters: parseDemoClusters(values.clusters) } : {}),
      ...(values['agent-listen'] !== undefined ? { agentListen: values['agent-listen'] } : {}),
      ...(values.oidc ? { oidc: true } : {}),
      logger: loggerOptions(parseLogging({ format: values['logging-format'] ?? values['log-format'], level: values['log-level'] })),
    };
  } catch (e) {
    process.stderr.write(`kube-stream-proxy demo: ${(e as Error).message}\n\n${DEMO_USAGE}`);
    return 2;
  }
  let demo;
  try {
    demo = await runDemo(options);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`kube-stream-proxy demo: ${e.message}\n`);
    return 2;
  }
  demo.proxy.app.log.info(heapFloorLogFields(), 'heap floor');
  // Before the banner: whoever reads it may send SIGTERM at once (tests do).
  installShutdown(() => demo.shutdown());
  process.stdout.write(demo.banner);
}

