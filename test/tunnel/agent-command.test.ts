/**
 * `agent` flags: --access-as, the agent's own credentials (token file, client certificate,
 * kubeconfig) through the code `serve` uses, and the refusals naming the flag.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/errors.js';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { AGENT_USAGE, parseAgentArgs } from '../../src/tunnel/agent-command.js';
import type { AgentPoolOptions } from '../../src/tunnel/agent-pool.js';

const warnings: string[] = [];
const log = { info: () => {}, warn: (_o: object, msg: string) => void warnings.push(msg) };
let dir: string;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  warnings.length = 0;
});

function setup(): { base: string[]; saToken: string } {
  dir = mkdtempSync(join(tmpdir(), 'ksp-agent-flags-'));
  writeFileSync(join(dir, 'token'), 'agent-token\n');
  writeFileSync(join(dir, 'sa.token'), 'sa-token\r\n');
  return {
    base: ['--proxy-url', 'http://127.0.0.1:8132', '--cluster-name', 'one', '--token-file', join(dir, 'token')],
    saToken: join(dir, 'sa.token'),
  };
}

async function options(argv: string[]): Promise<AgentPoolOptions> {
  const parsed = await parseAgentArgs(argv, log);
  if (parsed.help) throw new Error('help');
  return parsed.options;
}

describe('agent flags', () => {
  it('default: passthrough, no credentials of its own', async () => {
    const { base } = setup();
    const o = await options([...base, '--upstream', 'http://127.0.0.1:6444']);
    expect(o.accessAs).toBe('passthrough');
    expect(o.upstream.url.origin).toBe('http://127.0.0.1:6444');
  });

  it('impersonate with --upstream-token-file: the token (trimmed) is the agent\'s Authorization', async () => {
    const { base, saToken } = setup();
    const o = await options([...base, '--upstream', 'http://127.0.0.1:6444', '--access-as', 'impersonate', '--upstream-token-file', saToken]);
    expect(o.accessAs).toBe('impersonate');
    expect(await o.upstream.authHeaders()).toEqual({ Authorization: 'Bearer sa-token' });
  });

  it('impersonate with --kubeconfig: server and token of the current context', async () => {
    const { base } = setup();
    const kc = join(dir, 'kubeconfig');
    writeKubeconfig(kc, { server: 'https://127.0.0.1:7001', name: 'agent', token: 'kubeconfig-token' });
    const o = await options([...base, '--kubeconfig', kc, '--access-as', 'impersonate']);
    expect(o.upstream.url.origin).toBe('https://127.0.0.1:7001');
    expect((await o.upstream.authHeaders()).Authorization).toBe('Bearer kubeconfig-token');
    // --upstream overrides the kubeconfig's server, as for serve.
    const over = await options([...base, '--kubeconfig', kc, '--upstream', 'https://127.0.0.1:7002']);
    expect(over.upstream.url.origin).toBe('https://127.0.0.1:7002');
  });

  it.each([
    [['--access-as', 'admin', '--upstream', 'http://127.0.0.1:1'], /--access-as: want passthrough or impersonate/],
    [['--upstream', 'http://127.0.0.1:1', '--upstream-token-file', 'SA'], /need --access-as impersonate: in passthrough the agent adds no credentials/],
    [['--access-as', 'impersonate', '--upstream', 'http://127.0.0.1:1'], /--access-as impersonate needs the agent's own credentials/],
    [[], /--upstream URL \(or --kubeconfig \/ --in-cluster\) is required/],
    [['--kubeconfig', 'K', '--in-cluster'], /mutually exclusive/],
    [['--upstream', 'http://127.0.0.1:1', '--upstream-ca-file', 'x'], /--upstream-ca-file and --upstream-client-\*-file need an https --upstream/],
  ])('%j is refused naming the flag', async (extra, message) => {
    const { base, saToken } = setup();
    const argv = [...base, ...extra.map((a) => (a === 'SA' ? saToken : a === 'K' ? join(dir, 'kubeconfig') : a))];
    if (extra.includes('K')) writeKubeconfig(join(dir, 'kubeconfig'), { server: 'http://127.0.0.1:1', name: 'k' });
    const err = await parseAgentArgs(argv, log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
  });

  it('the help text documents --access-as and the credential flags', () => {
    for (const flag of ['--access-as', '--kubeconfig', '--in-cluster', '--upstream-token-file', '--upstream-client-cert-file', 'tokenreviews']) expect(AGENT_USAGE).toContain(flag);
  });
});
