/**
 * Acceptance for the metrics of issue 6: exec, attach, a passthrough exec, failed upgrades and a
 * port-forward through the in-process proxy in front of the in-process dev cluster, with real
 * kubectl 1.33; after each, `/metrics` shows every counter with the expected labels and increments.
 * Then `promtool check metrics` (Debian's prometheus package) lints the exposition.
 *
 * The translator's and the tunnel's counters are what the first part is about, so that proxy runs
 * with `--upstream-streaming spdy` (the dev cluster plays kube-apiserver 1.36, which takes WebSockets
 * itself: the default would pass them through). The second part is the default (`auto`): the same
 * sessions passed through (`proxied_to_upstream`, with the dev cluster's own counters saying who
 * served them), and failed upgrades asked once more in the other protocol (the fallback counter).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { connect, createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { WebSocket } from 'ws';
import { resolveConfig } from '../../src/config.js';
import { startServer } from '../../src/server.js';
import { counterValue } from '../helpers/metrics.js';
import { startBytesServer, downloadDigest, type BytesServer } from '../helpers/http-fixture.js';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { moved, wayCounts } from '../dev/cluster/streaming-ways.js';
import { eventually, startOperabilityFixture, type OperabilityFixture } from './operability-fixture.js';

const skipReason = kubectlE2eSkipReason();

/** A metric sample: name plus labels. */
type Sample = [name: string, labels: Record<string, string>];

/** Run `body`, then wait until every sample in `expected` rose by exactly its delta. */
async function expectIncrements(fx: OperabilityFixture, expected: Array<[...Sample, number]>, body: () => Promise<void>): Promise<void> {
  const before = await fx.metrics();
  await body();
  const deltas = (text: string): number[] => expected.map(([n, l]) => counterValue(text, n, l) - counterValue(before, n, l));
  const want = expected.map(([, , d]) => d);
  let last: number[] = [];
  await eventually(
    'the expected metric increments',
    async () => {
      last = deltas(await fx.metrics());
      return last.every((d, i) => d === want[i]) ? true : undefined;
    },
    15_000,
  ).catch((e: Error) => {
    throw new Error(`${e.message}\n${expected.map(([n, l, d], i) => `  ${n}${JSON.stringify(l)}: want +${d}, got +${last[i]}`).join('\n')}`);
  });
}

/** Write a raw request on a new connection and return everything the proxy answered until it closed. */
async function rawExchange(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(request);
  await once(socket, 'close');
  return Buffer.concat(chunks).toString('latin1');
}

/** A v5 WebSocket exec; resolves with the Status received on channel 3. */
/** A v5 WebSocket exec refused at the handshake: the answer's status code and its Status body. */
async function refusedWebsocketExec(url: string, path: string): Promise<{ code: number; status: Record<string, unknown> }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + path, ['v5.channel.k8s.io']);
  ws.on('error', () => {});
  ws.on('open', () => ws.terminate());
  const [, res] = (await once(ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
  let body = '';
  for await (const chunk of res) body += String(chunk);
  ws.terminate();
  return { code: res.statusCode ?? 0, status: JSON.parse(body) as Record<string, unknown> };
}

describe.skipIf(skipReason !== undefined)('metrics after exec, attach, failed upgrades and port-forward (kubectl 1.33)', () => {
  let fx: OperabilityFixture;
  let bin: string;
  let bytesServer: BytesServer;

  beforeAll(async () => {
    // Translator and tunnel metrics: translate here (see the file's comment).
    fx = await startOperabilityFixture({ upstreamStreaming: 'spdy' });
    bytesServer = await startBytesServer();
    bin = findKubectl('1.33');
  });
  afterAll(async () => {
    await fx?.close();
    await bytesServer?.close();
  });

  const kubectl = (args: string[], o: { stdin?: Buffer; env?: Record<string, string> } = {}) =>
    runKubectl(bin, args, { kubeconfig: fx.kubeconfig, cwd: fx.work, timeoutMs: 60_000, ...o });

  it('exec (WebSocket v5, translated)', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_translator_requests_total', { code: '200' }, 1],
        ['apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'translated_at_apiserver' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'websocket', path: 'translated', outcome: 'success' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'exec', path: 'translated' }, 1],
        ['kube_stream_proxy_handshake_duration_seconds_count', { subresource: 'exec', path: 'translated' }, 1],
        ['kube_stream_proxy_upgraded_bytes_total', { direction: 'to_client' }, 3],
        ['kube_stream_proxy_websocket_failures_total', {}, 0],
      ],
      async () => {
        const r = await kubectl(['exec', 'demo', '--', 'echo', 'hi']);
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toBe('hi\n');
      },
    );
    expect(await fx.value('kube_stream_proxy_active_sessions')).toBe(0);
  });

  it('exec with a non-zero exit counts as translator code 200 and outcome nonzero_exit', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_translator_requests_total', { code: '200' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', path: 'translated', outcome: 'nonzero_exit' }, 1],
      ],
      async () => {
        const r = await kubectl(['exec', 'demo', '--', 'sh', '-c', 'exit 4']);
        expect(r.code, summary(r)).toBe(4);
      },
    );
  });

  it('attach (WebSocket v5, translated)', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_translator_requests_total', { code: '200' }, 1],
        ['apiserver_websocket_streaming_requests_total', { subresource: 'attach', proxy_type: 'translated_at_apiserver' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'attach', protocol: 'websocket', path: 'translated', outcome: 'success' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'attach', path: 'translated' }, 1],
      ],
      async () => {
        const r = await kubectl(['attach', '-i', 'demo'], { stdin: Buffer.from('echo attached-ok\nexit 0\n') });
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toContain('attached-ok');
      },
    );
  });

  it('exec over SPDY (passthrough): no WebSocket counters move', async () => {
    await expectIncrements(
      fx,
      [
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'spdy', path: 'passthrough', outcome: 'success' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '101' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'exec', path: 'passthrough' }, 1],
        ['apiserver_stream_translator_requests_total', {}, 0],
        ['apiserver_websocket_streaming_requests_total', {}, 0],
      ],
      async () => {
        const r = await kubectl(['exec', 'demo', '--', 'echo', 'spdy'], { env: FORCE_SPDY_ENV });
        expect(r.code, summary(r)).toBe(0);
      },
    );
  });

  it('a failed SPDY upgrade (no such pod) is relayed and counted', async () => {
    await expectIncrements(
      fx,
      [
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '404' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'spdy', path: 'passthrough', outcome: 'upstream_refused' }, 1],
        ['kube_stream_proxy_handshake_duration_seconds_count', { subresource: 'exec', path: 'passthrough' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'exec', path: 'passthrough' }, 0],
      ],
      async () => {
        const answer = await rawExchange(
          fx.proxy.url,
          'POST /api/v1/namespaces/default/pods/missing/exec?command=true&stdout=true HTTP/1.1\r\nHost: x\r\n' +
            'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n',
        );
        expect(answer).toMatch(/^HTTP\/1\.1 404/);
      },
    );
  });

  it('a failed translated upgrade (no such pod): the 404 is the handshake answer; translator code 404, WebSocket failure upstream_refused', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_translator_requests_total', { code: '404' }, 1],
        ['apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'translated_at_apiserver' }, 1],
        ['kube_stream_proxy_websocket_failures_total', { reason: 'upstream_refused' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'websocket', path: 'translated', outcome: 'upstream_refused' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '404' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '101' }, 0],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'exec', path: 'translated' }, 0],
      ],
      async () => {
        const answer = await refusedWebsocketExec(fx.proxy.url, '/api/v1/namespaces/default/pods/missing/exec?command=true&stdout=true');
        expect(answer).toMatchObject({ code: 404, status: { kind: 'Status', status: 'Failure', code: 404 } });
      },
    );
  });

  it('a refused WebSocket handshake: translator code 400, failure handshake_failed', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_translator_requests_total', { code: '400' }, 1],
        ['kube_stream_proxy_websocket_failures_total', { reason: 'handshake_failed' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', path: 'translated', outcome: 'handshake_failed' }, 1],
      ],
      async () => {
        // A WebSocket upgrade without Sec-WebSocket-Key: ws refuses it with 400.
        const answer = await rawExchange(
          fx.proxy.url,
          'GET /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1\r\nHost: x\r\n' +
            'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n',
        );
        expect(answer).toMatch(/^HTTP\/1\.1 400/);
      },
    );
  });

  it('port-forward (WebSocket tunnel)', async () => {
    await expectIncrements(
      fx,
      [
        ['apiserver_stream_tunnel_requests_total', { code: '101' }, 1],
        // kube-apiserver's label for a tunnel it unwraps itself (not translated_at_apiserver, which is v5 exec/attach).
        ['apiserver_websocket_streaming_requests_total', { subresource: 'portforward', proxy_type: 'tunneled_at_apiserver' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'portforward', protocol: 'tunnel', path: 'tunnel' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'portforward', path: 'tunnel' }, 1],
      ],
      async () => {
        const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${bytesServer.port}`], { kubeconfig: fx.kubeconfig, env: {}, cwd: fx.work });
        try {
          const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytesServer.port}\\b`), 30_000);
          const d = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/100000?seed=5`);
          expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytesServer.expected(100000, 5));
          expect(await fx.value('kube_stream_proxy_active_sessions', { subresource: 'portforward', path: 'tunnel' })).toBe(1);
        } finally {
          await pf.stop('SIGINT', 10_000);
        }
      },
    );
    expect(await fx.value('kube_stream_proxy_active_sessions')).toBe(0);
  });

  it('promtool check metrics reports no problem', async () => {
    const promtool = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
    expect(
      promtool,
      'promtool not found: install Debian\'s "prometheus" package (apt-get update && apt-get install -y prometheus); the pretest step of npm test (scripts/provision-test-tools.sh) installs it when missing',
    ).not.toBe('');
    const text = await fx.metrics();
    const r = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect({ status: r.status, output: (r.stdout + r.stderr).trim() }).toEqual({ status: 0, output: '' });
    // Every family of issue 6 is present.
    for (const name of [
      'apiserver_stream_translator_requests_total',
      'apiserver_stream_tunnel_requests_total',
      'apiserver_websocket_streaming_requests_total',
      'kube_stream_proxy_streaming_requests_total',
      'kube_stream_proxy_websocket_failures_total',
      'kube_stream_proxy_active_sessions',
      'kube_stream_proxy_upgraded_bytes_total',
      'kube_stream_proxy_session_duration_seconds',
      'kube_stream_proxy_handshake_duration_seconds',
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    }
  });
});

describe.skipIf(skipReason !== undefined)('metrics of the default path (--upstream-streaming auto, kubectl 1.33)', () => {
  let fx: OperabilityFixture;
  let bin: string;
  let bytesServer: BytesServer;

  beforeAll(async () => {
    fx = await startOperabilityFixture();
    bytesServer = await startBytesServer();
    bin = findKubectl('1.33');
  });
  afterAll(async () => {
    await fx?.close();
    await bytesServer?.close();
  });

  it('exec (WebSocket v5, passed through; the dev cluster hands it to its kubelet)', async () => {
    const ways = await wayCounts(fx.cluster);
    await expectIncrements(
      fx,
      [
        ['apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'websocket', path: 'passthrough', outcome: 'success' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'exec', path: 'passthrough' }, 1],
        ['kube_stream_proxy_handshake_duration_seconds_count', { subresource: 'exec', path: 'passthrough' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '101' }, 1],
        ['apiserver_stream_translator_requests_total', {}, 0],
        ['kube_stream_proxy_upstream_streaming_fallbacks_total', {}, 0],
      ],
      async () => {
        const r = await runKubectl(bin, ['exec', 'demo', '--', 'echo', 'hi'], { kubeconfig: fx.kubeconfig, cwd: fx.work, timeoutMs: 60_000 });
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toBe('hi\n');
      },
    );
    expect(moved(ways, await wayCounts(fx.cluster))).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 });
    expect(await fx.value('kube_stream_proxy_active_sessions')).toBe(0);
  });

  it('port-forward (the tunnel, passed through; the dev cluster hands it to its kubelet)', async () => {
    const ways = await wayCounts(fx.cluster);
    await expectIncrements(
      fx,
      [
        ['apiserver_websocket_streaming_requests_total', { subresource: 'portforward', proxy_type: 'proxied_to_upstream' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'portforward', protocol: 'tunnel', path: 'passthrough' }, 1],
        ['kube_stream_proxy_session_duration_seconds_count', { subresource: 'portforward', path: 'passthrough' }, 1],
        ['apiserver_stream_tunnel_requests_total', {}, 0],
        ['kube_stream_proxy_upstream_streaming_fallbacks_total', {}, 0],
      ],
      async () => {
        const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${bytesServer.port}`], { kubeconfig: fx.kubeconfig, env: {}, cwd: fx.work });
        try {
          const m = await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytesServer.port}\\b`), 30_000);
          const d = await downloadDigest(`http://127.0.0.1:${m[1]}/bytes/100000?seed=6`);
          expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytesServer.expected(100000, 6));
          expect(await fx.value('kube_stream_proxy_active_sessions', { subresource: 'portforward', path: 'passthrough' })).toBe(1);
        } finally {
          await pf.stop('SIGINT', 10_000);
        }
      },
    );
    expect(moved(ways, await wayCounts(fx.cluster))).toEqual({ 'apiserver/portforward/proxied_to_kubelet': 1, 'kubelet/portforward': 1 });
    expect(await fx.value('kube_stream_proxy_active_sessions')).toBe(0);
  });

  it('a failed v5 upgrade (no such pod): a NotFound Status is the same in every protocol, so it is relayed and nothing is asked again', async () => {
    await expectIncrements(
      fx,
      [
        ['kube_stream_proxy_upstream_streaming_fallbacks_total', {}, 0],
        ['apiserver_stream_translator_requests_total', {}, 0],
        ['apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' }, 1],
        ['apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'translated_at_apiserver' }, 0],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'websocket', path: 'passthrough', outcome: 'upstream_refused' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '404' }, 1],
      ],
      async () => {
        const answer = await refusedWebsocketExec(fx.proxy.url, '/api/v1/namespaces/default/pods/missing/exec?command=true&stdout=true');
        expect(answer).toMatchObject({ code: 404, status: { kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 } });
      },
    );
  });

  it('a failed SPDY upgrade (no such pod): relayed, nothing asked again over WebSocket', async () => {
    await expectIncrements(
      fx,
      [
        ['kube_stream_proxy_upstream_streaming_fallbacks_total', {}, 0],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'spdy', path: 'passthrough', outcome: 'upstream_refused' }, 1],
        ['kube_stream_proxy_streaming_requests_total', { subresource: 'exec' }, 1],
        ['kube_stream_proxy_upgrade_requests_total', { handler: 'exec', code: '404' }, 1],
        // kube-apiserver's counters are for WebSocket clients.
        ['apiserver_stream_translator_requests_total', {}, 0],
        ['apiserver_websocket_streaming_requests_total', {}, 0],
      ],
      async () => {
        const answer = await rawExchange(
          fx.proxy.url,
          'POST /api/v1/namespaces/default/pods/missing/exec?command=true&stdout=true HTTP/1.1\r\nHost: x\r\n' +
            'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n',
        );
        expect(answer).toMatch(/^HTTP\/1\.1 404/);
      },
    );
  });
});

describe('an unreachable upstream', () => {
  it('fails /readyz and counts dial errors by caller', async () => {
    // A loopback port nothing listens on (bound, then released).
    const spare = createServer().listen(0, '127.0.0.1');
    await once(spare, 'listening');
    const upstream = `http://127.0.0.1:${(spare.address() as AddressInfo).port}`;
    await new Promise((r) => spare.close(r));
    const proxy = await startServer(await resolveConfig({ listen: '127.0.0.1:0', upstream }));
    try {
      const ready = await fetch(`${proxy.url}/readyz`);
      expect(ready.status).toBe(500);
      expect(await ready.text()).toBe('[+]shutdown ok\n[-]upstream failed: reason withheld\nreadyz check failed\n');
      expect((await fetch(`${proxy.url}/livez`)).status).toBe(200);
      const answer = await rawExchange(
        proxy.url,
        'POST /api/v1/namespaces/default/pods/demo/exec?command=true&stdout=true HTTP/1.1\r\nHost: x\r\n' +
          'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n',
      );
      expect(answer).toMatch(/^HTTP\/1\.1 503/);
      const text = await (await fetch(`${proxy.url}/metrics`)).text();
      expect(counterValue(text, 'kube_stream_proxy_upstream_dial_errors_total', { caller: 'readiness', reason: 'unreachable' })).toBe(1);
      expect(counterValue(text, 'kube_stream_proxy_upstream_dial_errors_total', { caller: 'passthrough', reason: 'unreachable' })).toBe(1);
      expect(
        counterValue(text, 'kube_stream_proxy_streaming_requests_total', { subresource: 'exec', protocol: 'spdy', outcome: 'upstream_unreachable' }),
      ).toBe(1);
    } finally {
      await proxy.close();
    }
  });
});
