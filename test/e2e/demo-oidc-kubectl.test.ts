/**
 * `npm start -- --oidc` (and `--clusters 2 --oidc`) as a person uses it (issue 22): the demo's real
 * OpenID Provider, the proxy in impersonate mode over HTTPS, a kubeconfig whose user runs
 * `kube-stream-proxy login`. The first kubectl prints the device code; it is approved in headless
 * Chromium on the provider's sign-in page (screenshots in test-results/demo-oidc/); `kubectl auth
 * whoami` then shows the OIDC user and groups, exec works, the aggregated metrics API answers the
 * OIDC user; with two clusters behind agents, one login serves both contexts. kubectl 1.33; the
 * demo is the built CLI (needs `npm run build`).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveDeviceCodeInChromium, launchChromium, type TestChromium } from '../helpers/chromium.js';
import { startDemo, type DemoProcess } from '../helpers/demo.js';
import { findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';

const SHOTS = resolve(import.meta.dirname, '../../test-results/demo-oidc');

/** The sign-in the banner tells the reader. */
function signIn(demo: DemoProcess): { login: string; password: string } {
  const m = /sign in as (\S+) \/ (\S+)\n/.exec(demo.output());
  if (!m) throw new Error(`the banner names no sign-in:\n${demo.output()}`);
  return { login: m[1]!, password: m[2]! };
}

/** Run `kubectl ARGS` that logs in first: approve the printed device code in Chromium, then wait for its exit. */
async function withLogin(browser: TestChromium, demo: DemoProcess, kubeconfig: string, args: string[], shots: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const k = startKubectl(findKubectl('1.33'), args, { kubeconfig });
  try {
    const m = await k.waitForOutput(/open (\S+) and enter the code (\S+)\)/, 30_000);
    const page = await approveDeviceCodeInChromium(browser.context, { verificationUri: m[1]!, userCode: m[2]!, ...signIn(demo), screenshots: { dir: SHOTS, prefix: shots } });
    expect(page).toContain('Sign-in Success');
    const code = await new Promise<number | null>((r) => (k.child.exitCode !== null ? r(k.child.exitCode) : k.child.once('close', (c) => r(c))));
    return { code, ...k.output() };
  } finally {
    await k.stop('SIGKILL', 5_000);
  }
}

describe.skipIf(kubectlE2eSkipReason() !== undefined)('demo --oidc', () => {
  let browser: TestChromium;
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => browser?.close());

  describe('one cluster', () => {
    let work: string;
    let demo: DemoProcess;
    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'ksp-demo-oidc-'));
      demo = await startDemo(work, ['--oidc', '--listen', '127.0.0.1:0']);
    }, 60_000);
    afterAll(async () => {
      await demo?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it('prints the provider and the sign-in; the proxy is HTTPS in impersonate mode', () => {
      expect(demo.proxyUrl.protocol).toBe('https:');
      expect(demo.output()).toMatch(/^OpenID Provider \(npm oidc-provider\) listening on https:\/\/127\.0\.0\.1:\d+: sign in as alice \/ demo-password$/m);
      expect(demo.output()).toMatch(/kubectl auth whoami/);
    });

    it('kubectl auth whoami signs in through the browser and shows the OIDC user and groups; exec and the aggregated API work without another login', async () => {
      const who = await withLogin(browser, demo, demo.kubeconfig, ['auth', 'whoami'], 'single');
      expect(who.code, `${who.stdout}\n${who.stderr}`).toBe(0);
      expect(who.stdout).toMatch(/Username\s+alice@example\.com\n/);
      expect(who.stdout).toMatch(/Groups\s+\[oidc:developers system:authenticated\]\n/);
      const exec = await runKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'hello', 'alice'], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
      expect(exec.code, summary(exec)).toBe(0);
      expect(exec.stdout.toString()).toBe('hello alice\n');
      expect(exec.stderr).not.toContain('Please visit');
      const api = await runKubectl(findKubectl('1.33'), ['get', 'apiservices'], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
      expect(api.code, summary(api)).toBe(0);
      expect(api.stdout.toString()).toMatch(/^v1beta1\.metrics\.k8s\.io\s+kube-system\/metrics-server\s+True/m);
      const spdy = await runKubectl(findKubectl('1.27'), ['exec', 'demo', '--', 'echo', 'spdy', 'too'], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
      expect(spdy.code, summary(spdy)).toBe(0);
      expect(spdy.stdout.toString()).toBe('spdy too\n');
    }, 120_000);
  });

  describe('--clusters 2', () => {
    let work: string;
    let demo: DemoProcess;
    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'ksp-demo-oidc-clusters-'));
      demo = await startDemo(work, ['--clusters', '2', '--oidc', '--listen', '127.0.0.1:0']);
    }, 60_000);
    afterAll(async () => {
      await demo?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it('one login for both contexts: whoami in one signs in, two uses the same token; exec in both', async () => {
      const one = await withLogin(browser, demo, demo.kubeconfig, ['--context', 'one-modern', 'auth', 'whoami', '-o', 'json'], 'clusters');
      expect(one.code, `${one.stdout}\n${one.stderr}`).toBe(0);
      expect(JSON.parse(one.stdout).status.userInfo).toEqual({ username: 'alice@example.com', groups: ['oidc:developers', 'system:authenticated'] });
      const two = await runKubectl(findKubectl('1.33'), ['--context', 'two-older', 'auth', 'whoami', '-o', 'json'], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
      expect(two.code, summary(two)).toBe(0);
      expect(two.stderr).not.toContain('Please visit');
      expect(JSON.parse(two.stdout.toString()).status.userInfo.username).toBe('alice@example.com');
      for (const [context, pod] of [['one-modern', 'alpha'], ['two-older', 'beta']]) {
        const r = await runKubectl(findKubectl('1.27'), ['--context', context!, 'exec', pod!, '--', 'echo', `in ${context}`], { kubeconfig: demo.kubeconfig, timeoutMs: 30_000 });
        expect(r.code, summary(r)).toBe(0);
        expect(r.stdout.toString()).toBe(`in ${context}\n`);
      }
    }, 120_000);
  });
});
