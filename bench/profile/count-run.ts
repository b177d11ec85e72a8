/**
 * Socket event counts of one translated kubectl transfer (profiling aid): the proxy runs with
 * `--import PRELOAD` (bench/profile/count-preload.ts: counts socket pauses, resumes, reads, writev
 * calls and GCs and writes them to /tmp/counts-PID.json on SIGTERM), one kubectl 1.33 transfer, then the proxy is stopped.
 *
 *   node dist/bench/profile/count-run.js dist/bench/profile/count-preload.js [stdin|stdout] [bytes] [baseline tree]
 *
 * `KSP_PROFILE_NODE_ARGS` adds `node` flags for the proxy (e.g. "--no-memory-reducer").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sampleThreads, threadSecondsBetween } from '../proc-cpu.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { findKubectl } from '../../test/helpers/kubectl.js';
import { CLIENT } from '../harness.js';
import { measureTransfer, type Direction } from '../kubectl-throughput.js';
import { startDevClusterProcess, startNodeScript, startProxyProcess } from '../servers.js';

const GATES_ON = 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true';

async function main(): Promise<void> {
  const [preload, direction = 'stdin', bytes = '100000000', base] = process.argv.slice(2);
  const work = mkdtempSync(join(tmpdir(), 'ksp-count-'));
  const cluster = await startDevClusterProcess();
  const args = ['serve', '--listen', '127.0.0.1:0', '--upstream', cluster.url, '--feature-gates', GATES_ON];
  const extra = (process.env.KSP_PROFILE_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);
  const node = { nodeArgs: [...extra, '--import', pathToFileURL(resolve(preload!)).href] };
  const proxy = await (base
    ? startNodeScript(join(base, 'bin', 'kube-stream-proxy.js'), args, /^kube-stream-proxy listening on /, 30_000, node)
    : startProxyProcess(cluster.url, args.slice(5), node)
  ).catch(async (err: unknown) => {
    // Do not leave the dev cluster running when the proxy cannot start.
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
    throw err;
  });
  try {
    const kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: proxy.url, name: 'count' });
    const t0 = sampleThreads(proxy.pid);
    const r = await measureTransfer({ bin: findKubectl(CLIENT.version), kubeconfig, env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' }, direction: direction as Direction, bytes: Number(bytes), timeoutMs: 120_000 });
    const perThread = threadSecondsBetween(t0, sampleThreads(proxy.pid));
    console.log(`${direction} ${bytes} bytes in ${r.wallMs.toFixed(0)} ms; proxy CPU-s by thread: main thread ${perThread.main.toFixed(2)}, other threads ${perThread.other.toFixed(2)}`);
  } finally {
    await proxy.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('count-run.js')) void main();
