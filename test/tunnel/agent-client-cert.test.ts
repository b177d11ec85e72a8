/**
 * Agent authentication by client certificate (`serve --agent-client-ca-file`, agent
 * `--client-cert-file`/`--client-key-file`), in-process on loopback with a real TLS AgentListener
 * and real TunnelAgents: a certificate of the right CA with CN = the cluster connects without a
 * token; CN of another cluster → 403, another CA → 401 (Status to the agent, logged by both sides,
 * counted); a token alone is still accepted. Plus the flag checks of both commands.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { resolveConfig } from '../../src/config.js';
import { createMetrics } from '../../src/metrics.js';
import { Upstream } from '../../src/routing/upstream.js';
import { TunnelAgent, type AgentLogger } from '../../src/tunnel/agent.js';
import { parseAgentArgs } from '../../src/tunnel/agent-command.js';
import { AgentListener } from '../../src/tunnel/agent-listener.js';
import { AgentRegistry } from '../../src/tunnel/agent-registry.js';
import { AgentTokenFile } from '../../src/tunnel/agent-tokens.js';
import { createCa, createClientCert, createServerCert, type CertAndKey } from '../helpers/certs.js';
import { counterValue } from '../helpers/metrics.js';

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

/** A logger keeping its lines, with a wait for the first line matching a pattern. */
function recordingLog(): AgentLogger & { lines: string[]; waitFor(re: RegExp): Promise<string> } {
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const rec = (obj: object, msg: string): void => {
    const line = `${msg} ${JSON.stringify(obj)}`;
    lines.push(line);
    for (const w of [...waiters]) if (w.re.test(line)) waiters.splice(waiters.indexOf(w), 1) && w.resolve(line);
  };
  return {
    lines,
    info: rec,
    warn: rec,
    waitFor: (re) => {
      const seen = lines.find((l) => re.test(l));
      return seen !== undefined ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ re, resolve }));
    },
  };
}

interface CertRig {
  dir: string;
  ca: CertAndKey;
  url: URL;
  registry: AgentRegistry;
  metrics: Registry;
  proxyLog: ReturnType<typeof recordingLog>;
  agent(o: { cert?: CertAndKey; token?: string; websocket?: boolean }): { agent: TunnelAgent; log: ReturnType<typeof recordingLog> };
}

async function certRig(): Promise<CertRig> {
  const dir = mkdtempSync(join(tmpdir(), 'ksp-agent-cert-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tokens.csv'), 'secret,one\n');
  const ca = await createCa(dir);
  const serving = await createServerCert(dir, ca);
  const metrics = new Registry();
  const m = createMetrics(metrics, { processMetrics: false });
  const registry = new AgentRegistry(m);
  const proxyLog = recordingLog();
  const listener = new AgentListener({
    listen: { host: '127.0.0.1', port: 0 },
    tls: { cert: serving.cert, key: serving.key },
    clientCa: ca.cert,
    tokens: new AgentTokenFile(join(dir, 'tokens.csv')),
    registry,
    metrics: m,
    log: proxyLog,
  });
  const url = new URL(`https://${await listener.listen()}`);
  cleanups.push(async () => {
    await registry.closeAll(100);
    await listener.close();
  });
  let n = 0;
  return {
    dir,
    ca,
    url,
    registry,
    metrics,
    proxyLog,
    agent: ({ cert, token, websocket }) => {
      const log = recordingLog();
      const tokenFile = join(dir, `token-${n++}`);
      if (token !== undefined) writeFileSync(tokenFile, `${token}\n`);
      const agent = new TunnelAgent({
        proxyUrl: websocket ? new URL(url.href.replace(/^https:/, 'wss:')) : url,
        proxyCa: ca.cert,
        clusterName: 'one',
        ...(token !== undefined ? { tokenFile } : {}),
        ...(cert ? { clientCertFile: cert.certFile, clientKeyFile: cert.keyFile } : {}),
        upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined),
        log,
        random: () => 0,
      });
      cleanups.push(() => agent.stop());
      return { agent, log };
    },
  };
}

describe('agent listener with --agent-client-ca-file', () => {
  it('a certificate of the CA with CN = the cluster connects without a token', async () => {
    const r = await certRig();
    const cert = await createClientCert(r.dir, r.ca, { cn: 'one' });
    const connected = r.registry.nextTunnel('one');
    const { log } = r.agent({ cert });
    await connected;
    await log.waitFor(/^tunnel established/);
    expect(await r.proxyLog.waitFor(/^agent connected/)).toContain('"auth":"certificate"');
    expect(counterValue(await r.metrics.metrics(), 'kube_stream_proxy_tunnel_agent_connections_total', { cluster: 'one' })).toBe(1);
  });

  it('the same over the WebSocket carrier (wss://)', async () => {
    const r = await certRig();
    const cert = await createClientCert(r.dir, r.ca, { cn: 'one' });
    const connected = r.registry.nextTunnel('one');
    const { log } = r.agent({ cert, websocket: true });
    await connected;
    await log.waitFor(/^tunnel established/);
    const line = await r.proxyLog.waitFor(/^agent connected/);
    expect(line).toContain('"auth":"certificate"');
    expect(line).toContain('"carrier":"websocket"');
  });

  it('a certificate whose CN is another cluster is refused with 403, logged and counted', async () => {
    const r = await certRig();
    const cert = await createClientCert(r.dir, r.ca, { cn: 'two' });
    // A valid token beside it does not help: the verified certificate decides.
    const { log } = r.agent({ cert, token: 'secret' });
    const line = await log.waitFor(/^proxy refused the agent/);
    expect(line).toContain('"status":403');
    expect(line).toContain('client certificate (CN \\"two\\") is not valid for cluster \\"one\\"');
    expect(await r.proxyLog.waitFor(/^agent refused/)).toContain('"reason":"forbidden"');
    expect(counterValue(await r.metrics.metrics(), 'kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'forbidden' })).toBeGreaterThanOrEqual(1);
    expect(r.registry.pick('one')).toBeUndefined();
  });

  it('a certificate of another CA is refused with 401, logged and counted', async () => {
    const r = await certRig();
    const otherDir = join(r.dir, 'other');
    mkdirSync(otherDir);
    const otherCa = await createCa(otherDir, 'some other CA');
    const cert = await createClientCert(otherDir, otherCa, { cn: 'one' });
    const { log } = r.agent({ cert });
    const line = await log.waitFor(/^proxy refused the agent/);
    expect(line).toContain('"status":401');
    expect(line).toContain("client certificate is not valid: UNABLE_TO_VERIFY_LEAF_SIGNATURE");
    expect(await r.proxyLog.waitFor(/^agent refused/)).toContain('"reason":"unauthorized"');
    expect(counterValue(await r.metrics.metrics(), 'kube_stream_proxy_tunnel_agent_refusals_total', { reason: 'unauthorized' })).toBeGreaterThanOrEqual(1);
    expect(r.registry.pick('one')).toBeUndefined();
  });

  it('a token alone is still accepted; neither token nor certificate → 401', async () => {
    const r = await certRig();
    const connected = r.registry.nextTunnel('one');
    r.agent({ token: 'secret' });
    await connected;
    expect(await r.proxyLog.waitFor(/^agent connected/)).toContain('"auth":"token"');
    const bare = r.agent({});
    expect(await bare.log.waitFor(/^proxy refused the agent/)).toContain('no agent client certificate or bearer token');
  });
});

describe('client certificate flags', () => {
  it('serve: --agent-client-ca-file needs a TLS agent listener; with it the token file is optional', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-agent-cert-flags-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const ca = await createCa(dir);
    const serving = await createServerCert(dir, ca);
    await expect(resolveConfig({ listen: '127.0.0.1:0', agentListen: '127.0.0.1:0', agentClientCaFile: ca.certFile })).rejects.toThrow(
      /--agent-client-ca-file needs a TLS agent listener/,
    );
    await expect(resolveConfig({ listen: '127.0.0.1:0', agentListen: '127.0.0.1:0' })).rejects.toThrow(/--agent-token-file .* or --agent-client-ca-file/);
    const config = await resolveConfig({
      listen: '127.0.0.1:0',
      agentListen: '127.0.0.1:0',
      agentClientCaFile: ca.certFile,
      tlsCertFile: serving.certFile,
      tlsPrivateKeyFile: serving.keyFile,
    });
    expect(config.agents?.clientCa?.equals(ca.cert)).toBe(true);
    expect(config.agents?.tokens).toBeUndefined();
  });

  it('agent: the cert/key pair replaces --token-file, goes with https only, and both halves are needed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-agent-cert-flags-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const ca = await createCa(dir);
    const cert = await createClientCert(dir, ca, { cn: 'one' });
    const quiet: AgentLogger = { info: () => {}, warn: () => {} };
    const base = ['--cluster-name', 'one', '--upstream', 'http://127.0.0.1:1'];
    const parsed = await parseAgentArgs(['--proxy-url', 'https://proxy.example:8132', ...base, '--client-cert-file', cert.certFile, '--client-key-file', cert.keyFile], quiet);
    expect(parsed.help === false && parsed.options).toMatchObject({ clientCertFile: cert.certFile, clientKeyFile: cert.keyFile });
    expect(parsed.help === false && parsed.options.tokenFile).toBeUndefined();
    await expect(parseAgentArgs(['--proxy-url', 'https://p:1', ...base, '--client-cert-file', cert.certFile], quiet)).rejects.toThrow(/go together/);
    await expect(parseAgentArgs(['--proxy-url', 'http://127.0.0.1:1', ...base, '--client-cert-file', cert.certFile, '--client-key-file', cert.keyFile], quiet)).rejects.toThrow(
      /not TLS/,
    );
    await expect(parseAgentArgs(['--proxy-url', 'https://p:1', ...base], quiet)).rejects.toThrow(/--token-file \(or --client-cert-file/);
  });
});
