import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_UPGRADE_RESPONSE_TIMEOUT, isLoopbackHost, parseGoDuration, resolveConfig, type ServeFlags } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { FEATURE_GATE_DEFAULTS, parseFeatureGates } from '../../src/feature-gate.js';

const dir = mkdtempSync(join(tmpdir(), 'ksp-config-'));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

async function configError(flags: ServeFlags): Promise<ConfigError> {
  try {
    await resolveConfig(flags);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe('KSP_ERR_CONFIG');
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('parseFeatureGates', () => {
  it('gives the defaults (all on) for no value', () => {
    expect(parseFeatureGates(undefined)).toEqual({ TranslateStreamCloseWebsocketRequests: true, PortForwardWebsockets: true, AuthorizePodWebsocketUpgradeCreatePermission: true, ExtendWebSocketsToKubelet: true });
    expect(parseFeatureGates('')).toEqual(FEATURE_GATE_DEFAULTS);
  });

  it('reads the apiserver syntax with ParseBool values and spaces', () => {
    expect(parseFeatureGates('TranslateStreamCloseWebsocketRequests=false, PortForwardWebsockets=T')).toEqual({
      ...FEATURE_GATE_DEFAULTS,
      TranslateStreamCloseWebsocketRequests: false,
      PortForwardWebsockets: true,
    });
    expect(parseFeatureGates('PortForwardWebsockets=0').PortForwardWebsockets).toBe(false);
  });

  it.each([
    ['Bogus=true', /unrecognized feature gate: Bogus/],
    ['PortForwardWebsockets', /missing bool value for PortForwardWebsockets/],
    ['PortForwardWebsockets=yes', /invalid value of PortForwardWebsockets=yes/],
    ['portforwardwebsockets=true', /unrecognized feature gate: portforwardwebsockets/],
  ])('refuses %s', (spec, message) => {
    expect(() => parseFeatureGates(spec)).toThrow(ConfigError);
    expect(() => parseFeatureGates(spec)).toThrow(message);
  });
});

describe('parseGoDuration', () => {
  it.each([
    ['30s', 30_000],
    ['1m', 60_000],
    ['1m30s', 90_000],
    ['1.5h', 5_400_000],
    ['250ms', 250],
    ['0', 0],
  ])('%s = %d ms', (text, ms) => expect(parseGoDuration(text)).toBe(ms));

  it.each(['', '30', '1d', 's', '-1s', '1m 30s'])('refuses %j', (text) => {
    expect(() => parseGoDuration(text)).toThrow(ConfigError);
  });
});

describe('resolveConfig', () => {
  it('applies the defaults', async () => {
    const c = await resolveConfig({ upstream: 'http://127.0.0.1:6444' });
    expect(c.listen).toEqual({ host: '127.0.0.1', port: 6443 });
    expect(c.tls).toBeUndefined();
    expect(c.maxConnectionBytesPerSec).toBe(0);
    expect(c.upgradeResponseTimeoutMs).toBe(parseGoDuration(DEFAULT_UPGRADE_RESPONSE_TIMEOUT));
    expect(c.featureGates).toEqual(FEATURE_GATE_DEFAULTS);
    expect(c.upstream!.url.href).toBe('http://127.0.0.1:6444/');
    expect(c.websocketAllowedOrigins).toBe('*');
    expect(c.upstreamStreaming).toBe('auto');
  });

  it.each(['auto', 'websocket', 'spdy'] as const)('reads --upstream-streaming %s', async (value) => {
    expect((await resolveConfig({ upstream: 'http://127.0.0.1:6444', upstreamStreaming: value })).upstreamStreaming).toBe(value);
  });

  it('reads --websocket-allowed-origins', async () => {
    const c = await resolveConfig({ upstream: 'http://127.0.0.1:6444', websocketAllowedOrigins: 'https://Console.example, http://127.0.0.1:8080' });
    expect(c.websocketAllowedOrigins).toEqual(['https://console.example', 'http://127.0.0.1:8080']);
  });

  it('reads an upstream kubeconfig (server, CA, token)', async () => {
    const kubeconfig = file(
      'kubeconfig',
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: 'https://10.0.0.1:6443', 'certificate-authority-data': Buffer.from('PEM').toString('base64') } }],
        users: [{ name: 'u', user: { token: 'kc-token' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    const c = await resolveConfig({ kubeconfig });
    expect(c.upstream!.url.href).toBe('https://10.0.0.1:6443/');
    expect(c.upstream!.tls?.ca?.toString()).toBe('PEM');
    expect(await c.upstream!.authHeaders()).toMatchObject({ Authorization: 'Bearer kc-token' });
  });

  it.each<[string, ServeFlags, RegExp]>([
    ['plain HTTP on a non-loopback address', { listen: '0.0.0.0:6443', upstream: 'http://127.0.0.1:1' }, /plain HTTP is allowed only on a loopback address/],
    ['plain HTTP on all interfaces (empty host)', { listen: ':6443', upstream: 'http://127.0.0.1:1' }, /loopback/],
    ['a bad listen address', { listen: 'localhost', upstream: 'http://127.0.0.1:1' }, /--listen: invalid listen address/],
    ['a certificate without a key', { tlsCertFile: '/nope', upstream: 'http://127.0.0.1:1' }, /must be given together/],
    ['an unreadable certificate', { tlsCertFile: '/nope/cert', tlsPrivateKeyFile: '/nope/key', upstream: 'http://127.0.0.1:1' }, /--tls-cert-file: cannot read \/nope\/cert/],
    ['no upstream', {}, /--upstream URL \(or --kubeconfig \/ --in-cluster, or --agent-listen\) is required/],
    ['--agent-listen without a token file', { agentListen: '127.0.0.1:0' }, /--agent-listen needs --agent-token-file/],
    ['--agent-token-file without --agent-listen', { upstream: 'http://x', agentTokenFile: '/etc/hostname' }, /--agent-token-file needs --agent-listen/],
    ['plain --agent-listen off loopback', { agentListen: '0.0.0.0:0', agentTokenFile: '/etc/hostname' }, /plain TCP is allowed only on a loopback/],
    ['a non-http upstream', { upstream: 'ftp://x' }, /scheme must be http or https/],
    ['an upstream with a query', { upstream: 'https://x/?a=b' }, /must not carry a query/],
    ['a CA for an http upstream', { upstream: 'http://x', upstreamCaFile: '/etc/hostname' }, /need an https --upstream/],
    ['a client cert without key', { upstream: 'https://x', upstreamClientCertFile: '/etc/hostname' }, /given together/],
    ['a missing token file', { upstream: 'https://x', upstreamTokenFile: '/nope/token' }, /--upstream-token-file: cannot read/],
    ['kubeconfig plus token file', { kubeconfig: '/nope', upstreamTokenFile: '/nope' }, /cannot be combined with --kubeconfig/],
    ['kubeconfig plus in-cluster', { kubeconfig: '/nope', inCluster: true }, /mutually exclusive/],
    ['a negative bandwidth', { upstream: 'http://x', maxConnectionBytesPerSec: '-1' }, /non-negative integer/],
    ['a fractional bandwidth', { upstream: 'http://x', maxConnectionBytesPerSec: '1.5' }, /non-negative integer/],
    ['a bad timeout', { upstream: 'http://x', upgradeResponseTimeout: '30' }, /--upgrade-response-timeout: invalid duration/],
    ['a zero timeout', { upstream: 'http://x', upgradeResponseTimeout: '0s' }, /must be greater than 0/],
    ['an unknown feature gate', { upstream: 'http://x', featureGates: 'Nope=true' }, /unrecognized feature gate: Nope/],
    ['an unknown --upstream-streaming', { upstream: 'http://x', upstreamStreaming: 'Auto' }, /--upstream-streaming: want auto, websocket or spdy, got "Auto"/],
    ['an allowed origin with a path', { upstream: 'http://x', websocketAllowedOrigins: 'https://a.example/app' }, /--websocket-allowed-origins: "https:\/\/a.example\/app" is not an origin/],
    ['* among explicit origins', { upstream: 'http://x', websocketAllowedOrigins: '*,https://a.example' }, /--websocket-allowed-origins: \* cannot be combined/],
  ])('refuses %s', async (_name, flags, message) => {
    expect((await configError(flags)).message).toMatch(message);
  });

  it('allows plain HTTP on loopback only', () => {
    expect(['127.0.0.1', '127.1.2.3', '::1', 'localhost'].every(isLoopbackHost)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', 'example.com'].some(isLoopbackHost)).toBe(false);
  });
});
