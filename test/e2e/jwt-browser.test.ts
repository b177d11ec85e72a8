/**
 * A person with a browser and the OIDC login (issue 22), in real headless Chromium:
 * - `kubectl exec` with `kube-stream-proxy login` as its exec plugin prints a device code; the code is
 *   approved in Chromium on the OpenID Provider's pages (type the code, sign in, allow), and the
 *   exec runs as the OIDC user;
 * - a small page served on loopback opens a WebSocket v5 exec through the proxy with the JWT in the
 *   subprotocol `base64url.bearer.authorization.k8s.io.<token>` (what browsers must do) and shows
 *   the output, asserted on the page; the upstream sees the OIDC user impersonated and no token.
 * Screenshots are written to test-results/jwt-browser/. Needs `npm run build` (the plugin).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveDeviceCodeInChromium, launchChromium, type TestChromium } from '../helpers/chromium.js';
import { findKubectl, kubectlE2eSkipReason, startKubectl } from '../helpers/kubectl.js';
import { authenticationConfigFor, startTestProvider, TEST_CLIENT_ID, TEST_USERS, type TestProvider } from '../helpers/oidc-provider.js';
import { startSecurityFixture, USERS, type SecurityFixture } from '../security/security-fixture.js';

const BIN = resolve(import.meta.dirname, '../../bin/kube-stream-proxy.js');
const SHOTS = resolve(import.meta.dirname, '../../test-results/jwt-browser');
const ALICE = 'alice@example.com';

/** The page: the token comes in the URL fragment (never sent to this server), the output goes to #out. */
const PAGE = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>exec</title></head><body>
<h1>WebSocket exec through kube-stream-proxy</h1><pre id="out"></pre><p id="state">connecting</p>
<script>
const [proxy, token] = decodeURIComponent(location.hash.slice(1)).split(' ');
const b64 = btoa(token).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
const q = new URLSearchParams([['command', 'sh'], ['command', '-c'], ['command', 'echo hello from $0 in chromium; id -un >/dev/null'], ['stdout', 'true'], ['stderr', 'true']]);
const ws = new WebSocket(proxy.replace(/^http/, 'ws') + '/api/v1/namespaces/default/pods/demo/exec?' + q, ['base64url.bearer.authorization.k8s.io.' + b64, 'v5.channel.k8s.io']);
ws.binaryType = 'arraybuffer';
const dec = new TextDecoder();
ws.onopen = () => { document.getElementById('state').textContent = 'open ' + ws.protocol; };
ws.onmessage = (e) => { const b = new Uint8Array(e.data); if (b[0] === 1 || b[0] === 2) document.getElementById('out').textContent += dec.decode(b.subarray(1)); if (b[0] === 3) document.getElementById('state').dataset.status = dec.decode(b.subarray(1)); };
ws.onclose = (e) => { document.getElementById('state').textContent = 'closed ' + e.code; };
</script></body></html>`;

describe.skipIf(kubectlE2eSkipReason() !== undefined)('OIDC in a real browser (headless Chromium)', () => {
  let idp: TestProvider;
  let f: SecurityFixture;
  let work: string;
  let browser: TestChromium;
  let site: Server;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    idp = await startTestProvider();
    work = mkdtempSync(join(tmpdir(), 'ksp-jwt-browser-'));
    writeFileSync(join(work, 'auth.yaml'), authenticationConfigFor(idp));
    writeFileSync(join(work, 'idp-ca.pem'), idp.ca);
    f = await startSecurityFixture({
      authn: 'impersonate',
      extraPolicyRules: [{ groups: ['oidc:developers'], verbs: ['*'], resources: ['*'], nonResourceURLs: ['*'] }],
      serveFlags: { authenticationConfig: join(work, 'auth.yaml') },
    });
    site = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    site?.close();
    await f?.close();
    await idp?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('kubectl exec with the login plugin: the device code approved in Chromium, the exec runs as the OIDC user', async () => {
    const kubeconfig = join(work, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'p', cluster: { server: f.proxy.url, 'certificate-authority-data': f.pki.ca.cert.toString('base64') } }],
        users: [{ name: 'oidc', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: [BIN, 'login', `--oidc-issuer-url=${idp.issuer}`, `--oidc-client-id=${TEST_CLIENT_ID}`, '--oidc-extra-scope=email,groups', `--certificate-authority=${join(work, 'idp-ca.pem')}`, `--token-cache-dir=${join(work, 'cache')}`], interactiveMode: 'Never' } } }],
        contexts: [{ name: 'p', context: { cluster: 'p', user: 'oidc', namespace: 'default' } }],
        'current-context': 'p',
      }),
    );
    const seen = f.cluster.requests.length;
    const exec = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'echo', 'signed in with a browser'], { kubeconfig });
    try {
      const m = await exec.waitForOutput(/open (\S+) and enter the code (\S+)\)/, 30_000);
      const text = await approveDeviceCodeInChromium(browser.context, { verificationUri: m[1]!, userCode: m[2]!, login: 'alice', password: TEST_USERS.alice!.password, screenshots: { dir: SHOTS, prefix: 'device' } });
      expect(text).toContain('Sign-in Success');
      await exec.waitForOutput(/signed in with a browser\n/, 30_000);
    } finally {
      expect(await exec.stop('SIGTERM', 20_000)).toMatchObject({ killed: false });
    }
    const upgrade = f.cluster.requests.slice(seen).find((r) => r.upgrade)!;
    expect(upgrade.headers['impersonate-user']).toBe(ALICE);
  }, 90_000);

  it('a page opens a v5 exec with the JWT in the WebSocket subprotocol; the output shows on the page', async () => {
    const token = await idp.mint({ email: ALICE, email_verified: true, groups: ['developers'] });
    const seen = f.cluster.requests.length;
    const page = await browser.context.newPage();
    try {
      const url = `http://127.0.0.1:${(site.address() as AddressInfo).port}/#${encodeURIComponent(`${f.proxy.url} ${token}`)}`;
      await page.goto(url);
      await page.waitForFunction("document.getElementById('state').textContent.startsWith('closed')", undefined, { timeout: 30_000 });
      expect(await page.textContent('#out')).toBe('hello from sh in chromium\n');
      expect(await page.getAttribute('#state', 'data-status')).toContain('"status":"Success"');
      await page.screenshot({ path: join(SHOTS, 'websocket-exec.png') });
    } finally {
      await page.close();
    }
    const upgrade = f.cluster.requests.slice(seen).find((r) => r.upgrade)!;
    expect(upgrade.headers['impersonate-user']).toBe(ALICE);
    expect(upgrade.headers.authorization).toBe(`Bearer ${USERS.proxy.token}`);
    expect(JSON.stringify(upgrade.rawHeaders)).not.toContain('base64url.bearer');
  }, 60_000);
});
