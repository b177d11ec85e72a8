/**
 * The `wss://` carrier through a real L7 proxy (issue 14 item 1): Debian's nginx on loopback
 * configured as a WebSocket-only reverse proxy (it answers 400 to any other upgrade, as an L7 load
 * balancer that knows only WebSockets does) in front of the proxy's agent listener. The agent dials
 * `ws://nginx` and kubectl exec runs through nginx and the tunnel; the same agent with the raw
 * carrier (`http://nginx`) is refused by nginx. Real processes; needs dist/ (`npx tsc -p tsconfig.json`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { findNginx, startNginx } from '../../bench/nginx.js';
import type { ServerProcess } from '../../bench/servers.js';
import { sha256 } from '../helpers/hash.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, summary } from '../helpers/kubectl.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { startTunnelFixture, type AgentProcess, type TunnelFixture } from './tunnel-fixture.js';

const nginxBin = findNginx();
const skipReason = kubectlE2eSkipReason() ?? (nginxBin === undefined ? 'nginx not installed (Debian package nginx)' : undefined);

/** nginx.conf: an L7 reverse proxy that passes WebSocket upgrades only. */
function webSocketOnlyConfig(o: { prefix: string; port: number; upstream: URL; runAsRoot: boolean }): string {
  const p = (name: string): string => join(o.prefix, name);
  return `# kube-stream-proxy test: nginx as a WebSocket-only L7 proxy (generated).
${o.runAsRoot ? 'user root;\n' : ''}daemon off;
master_process on;
worker_processes 1;
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${p('client_body')};
  proxy_temp_path ${p('proxy')};
  fastcgi_temp_path ${p('fastcgi')};
  uwsgi_temp_path ${p('uwsgi')};
  scgi_temp_path ${p('scgi')};
  server {
    listen 127.0.0.1:${o.port};
    location / {
      if ($http_upgrade !~* "^websocket$") { return 400; }
      proxy_pass http://${o.upstream.host};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
}
`;
}

describe.skipIf(skipReason !== undefined)('agent tunnel over a WebSocket through nginx (L7)', () => {
  let fx: TunnelFixture;
  let nginx: ServerProcess;
  let agent: AgentProcess;
  let wsUrl: string;

  beforeAll(async () => {
    fx = await startTunnelFixture({ one: ['alpha'] });
    nginx = await startNginx(nginxBin!, fx.proxy.agentUrl!, join(fx.work, 'nginx'), 15_000, webSocketOnlyConfig);
    wsUrl = nginx.url.replace(/^http:/, 'ws:');
    agent = fx.startAgent('one', { proxyUrls: [wsUrl] });
    await agent.waitForOutput(/tunnel established/, 20_000);
  }, 60_000);

  afterAll(async () => {
    await agent?.kill();
    await nginx?.close();
    await fx?.close();
  });

  it.each(['1.27', '1.33'] as const)('kubectl %s exec runs through nginx and the WebSocket tunnel: output, exit code, stdin sha256', async (version) => {
    expect(agent.output()).toMatch(new RegExp(`"msg":"tunnel established"[^\\n]*"proxy":"${wsUrl}"`));
    const run = (args: string[], stdin?: Buffer) => runKubectl(findKubectl(version), args, { kubeconfig: fx.kubeconfigs.one!, timeoutMs: 60_000, ...(stdin ? { stdin } : {}) });
    const echo = await run(['exec', 'alpha', '--', 'sh', '-c', 'echo through nginx; echo err >&2; exit 3']);
    expect(echo.code, summary(echo)).toBe(3);
    expect(echo.stdout.toString()).toBe('through nginx\n');
    expect(echo.stderr).toContain('err');
    const input = deterministicBytes(31, 2_000_000);
    const cat = await run(['exec', '-i', 'alpha', '--', 'sha256sum'], input);
    expect(cat.code, summary(cat)).toBe(0);
    expect(cat.stdout.toString().split(' ')[0]).toBe(sha256(input));
    const pods = await run(['get', 'pods', '-o', 'name']);
    expect(pods.stdout.toString().split('\n').filter((n) => n !== '').sort()).toEqual(['pod/alpha', 'pod/demo']);
  });

  it('the raw upgrade carrier does not pass this nginx: the agent is refused with 400', async () => {
    const raw = fx.startAgent('one', { proxyUrls: [nginx.url] });
    try {
      const m = await raw.waitForOutput(/"msg":"proxy refused the agent".*/, 20_000);
      expect(m[0]).toContain('"status":400');
      expect(m[0]).toContain('nginx');
    } finally {
      await raw.kill();
    }
    expect(await fx.metric('kube_stream_proxy_tunnel_agents', { cluster: 'one' })).toBe(1);
  });
});
