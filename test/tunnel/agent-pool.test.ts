/**
 * One tunnel per proxy replica (issue 14 item 6), in-process on loopback: two agent listeners on
 * 127.0.0.1 and 127.0.0.2 (same port, TLS with a certificate for the DNS name only), an AgentPool
 * whose `--proxy-url` host is a DNS name answered by an injected resolver. Addresses appearing get
 * a tunnel, vanishing ones lose theirs, a failed resolution keeps what is there, and the TLS server
 * name stays the DNS name (the certificate has no IP SAN, so a tunnel proves it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Upstream } from '../../src/routing/upstream.js';
import type { AgentLogger } from '../../src/tunnel/agent.js';
import { parseAgentArgs } from '../../src/tunnel/agent-command.js';
import { AgentListener } from '../../src/tunnel/agent-listener.js';
import { AgentPool } from '../../src/tunnel/agent-pool.js';
import { AgentRegistry, type AgentTunnel } from '../../src/tunnel/agent-registry.js';
import { AgentTokenFile } from '../../src/tunnel/agent-tokens.js';
import { createCa, createServerCert } from '../helpers/certs.js';

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

/** A logger that keeps what it was told. */
function recordingLog(): AgentLogger & { lines: string[] } {
  const lines: string[] = [];
  const rec = (obj: object, msg: string): void => void lines.push(`${msg} ${JSON.stringify(obj)}`);
  return { lines, info: rec, warn: rec };
}

describe('AgentPool: one tunnel per address of a DNS-named proxy URL', () => {
  it('adds tunnels for new addresses, stops vanished ones, keeps them through a failed lookup; TLS name stays the DNS name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-pool-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'tokens.csv'), 'secret,one\n');
    writeFileSync(join(dir, 'token'), 'secret\n');
    const ca = await createCa(dir);
    const serving = await createServerCert(dir, ca, { cn: 'proxy.test', san: 'DNS:proxy.test' });
    const replica = async (host: string, port: number): Promise<{ registry: AgentRegistry; port: number }> => {
      const registry = new AgentRegistry();
      const listener = new AgentListener({
        listen: { host, port },
        tls: { cert: serving.cert, key: serving.key },
        tokens: new AgentTokenFile(join(dir, 'tokens.csv')),
        registry,
        log: { info: () => {}, warn: () => {} },
      });
      const address = await listener.listen();
      cleanups.push(async () => {
        await registry.closeAll(100);
        await listener.close();
      });
      return { registry, port: Number(address.split(':').pop()) };
    };
    const a = await replica('127.0.0.1', 0);
    const b = await replica('127.0.0.2', a.port);

    let answer: string[] | Error = ['127.0.0.1'];
    const asked: string[] = [];
    const log = recordingLog();
    const firstA = a.registry.nextTunnel('one');
    const pool = new AgentPool({
      proxyUrls: [new URL(`https://proxy.test:${a.port}`)],
      proxyCa: ca.cert,
      resolveIntervalMs: 3_600_000, // the test drives re-resolution with resolveNow()
      resolver: async (name) => {
        asked.push(name);
        if (answer instanceof Error) throw answer;
        return answer;
      },
      clusterName: 'one',
      tokenFile: join(dir, 'token'),
      upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined),
      log,
    });
    cleanups.unshift(() => pool.stop());
    const tunnelA: AgentTunnel = await firstA;
    expect(asked).toEqual(['proxy.test']);
    expect(pool.tunnels.map((t) => t.proxy)).toEqual([`https://proxy.test:${a.port} (127.0.0.1)`]);

    // A second replica appears in DNS: a tunnel to it, the first one untouched.
    const firstB = b.registry.nextTunnel('one');
    answer = ['127.0.0.1', '127.0.0.2'];
    await pool.resolveNow();
    const tunnelB = await firstB;
    expect(pool.tunnels).toHaveLength(2);
    expect(a.registry.pick('one')?.session).toBe(tunnelA.session);
    expect(b.registry.pick('one')?.session).toBe(tunnelB.session);

    // DNS fails: both tunnels stay.
    answer = new Error('getaddrinfo EAI_AGAIN proxy.test');
    await pool.resolveNow();
    expect(pool.tunnels).toHaveLength(2);
    expect(log.lines.some((l) => l.startsWith('resolving the proxy failed') && l.includes('EAI_AGAIN'))).toBe(true);
    expect(tunnelA.session.closed || tunnelB.session.closed).toBe(false);

    // The first replica leaves DNS: its tunnel is closed (GOAWAY), the other stays.
    const aClosed = once(tunnelA.session, 'close');
    answer = ['127.0.0.2'];
    await pool.resolveNow();
    await aClosed;
    expect(a.registry.pick('one')).toBeUndefined();
    expect(b.registry.pick('one')?.session).toBe(tunnelB.session);
    expect(pool.tunnels.map((t) => t.proxy)).toEqual([`https://proxy.test:${a.port} (127.0.0.2)`]);
  });

  it('an IP-literal proxy URL is dialed as is, without a lookup', async () => {
    const asked: string[] = [];
    const pool = new AgentPool({
      proxyUrls: [new URL('http://127.0.0.1:1'), new URL('http://[::1]:1')],
      resolver: async (name) => {
        asked.push(name);
        return [];
      },
      clusterName: 'one',
      tokenFile: '/nonexistent',
      upstream: new Upstream(new URL('http://127.0.0.1:1'), undefined),
      log: { info: () => {}, warn: () => {} },
    });
    await pool.resolveNow();
    expect(pool.tunnels.map((t) => t.proxy)).toEqual(['http://127.0.0.1:1', 'http://[::1]:1']);
    expect(asked).toEqual([]);
    await pool.stop();
  });
});

describe('agent --proxy-url and --proxy-resolve-interval', () => {
  const quiet: AgentLogger = { info: () => {}, warn: () => {} };
  const withToken = (args: string[]): ReturnType<typeof parseAgentArgs> => {
    const dir = mkdtempSync(join(tmpdir(), 'ksp-pool-flags-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'token'), 'secret\n');
    return parseAgentArgs([...args, '--cluster-name', 'one', '--token-file', join(dir, 'token'), '--upstream', 'http://127.0.0.1:1'], quiet);
  };

  it('takes several proxy URLs of either carrier and a resolve interval', async () => {
    const parsed = await withToken(['--proxy-url', 'https://a.example:8132', '--proxy-url', 'wss://lb.example', '--proxy-url', 'ws://127.0.0.1:9', '--proxy-resolve-interval', '10s']);
    expect(parsed.help === false && parsed.options.proxyUrls.map((u: URL) => u.href)).toEqual(['https://a.example:8132/', 'wss://lb.example/', 'ws://127.0.0.1:9/']);
    expect(parsed.help === false && parsed.options.resolveIntervalMs).toBe(10_000);
    const defaults = await withToken(['--proxy-url', 'https://a.example:8132']);
    expect(defaults.help === false && defaults.options.resolveIntervalMs).toBe(30_000);
  });

  it.each([
    [['--proxy-url', 'https://a.example', '--proxy-url', 'https://a.example'], /given twice/],
    [['--proxy-url', 'ws://proxy.example:80'], /plain ws is allowed only to a loopback address/],
    [['--proxy-url', 'wss://proxy.example/some/prefix'], /scheme:\/\/host:port only/],
    [['--proxy-url', 'ftp://proxy.example'], /scheme must be https or wss/],
    [['--proxy-url', 'https://a.example', '--proxy-resolve-interval', '100ms'], /at least 1s/],
    [['--proxy-url', 'https://a.example', '--proxy-resolve-interval', 'soon'], /--proxy-resolve-interval: invalid duration/],
  ])('refuses %j', async (args, message) => {
    await expect(withToken(args)).rejects.toThrow(message);
  });
});
