/**
 * Real headless Chromium (Debian's `/usr/bin/chromium`, provisioned by
 * scripts/provision-test-tools.sh) driven by playwright-core, with the flags this machine needs:
 * no sandbox (root), no GPU, no QUIC, and no background networking (its connections out are refused
 * here), in a new empty profile. Certificate errors are ignored: the pages are on loopback with the
 * test PKI.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/** Where Debian puts Chromium. */
export const CHROMIUM = process.env.KSP_CHROMIUM ?? '/usr/bin/chromium';

/** A running browser (one persistent context in a fresh profile) and how to close it. */
export interface TestChromium {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Launch headless Chromium in a new empty profile. */
export async function launchChromium(): Promise<TestChromium> {
  const profile = mkdtempSync(join(tmpdir(), 'ksp-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    ignoreHTTPSErrors: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--ignore-certificate-errors'],
    viewport: { width: 900, height: 640 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Approve a device code as a person does on the demo/test OpenID Provider (`dev/oidc-issuer.ts`):
 * open the verification page, type the code, continue, sign in, allow. Screenshots of the sign-in
 * page and of the result go to `screenshots` (`<prefix>-sign-in.png`, `<prefix>-done.png`) when given.
 * Resolves with the last page's text.
 */
export async function approveDeviceCodeInChromium(
  context: BrowserContext,
  o: { verificationUri: string; userCode: string; login: string; password: string; screenshots?: { dir: string; prefix: string } },
): Promise<string> {
  const page = await context.newPage();
  try {
    await page.goto(o.verificationUri);
    await page.fill('input[name="user_code"]', o.userCode);
    await page.click('button[form="op.deviceInputForm"]');
    await page.click('button[autofocus][form="op.deviceConfirmForm"]');
    await page.waitForSelector('#login-name');
    await page.fill('#login-name', o.login);
    await page.fill('#login-password', o.password);
    if (o.screenshots) await page.screenshot({ path: join(o.screenshots.dir, `${o.screenshots.prefix}-sign-in.png`) });
    await page.click('#login button[type="submit"]');
    await page.waitForSelector('#consent');
    await page.click('#consent button[type="submit"]');
    await page.waitForLoadState('load');
    if (o.screenshots) await page.screenshot({ path: join(o.screenshots.dir, `${o.screenshots.prefix}-done.png`) });
    return await page.innerText('body');
  } finally {
    await page.close();
  }
}
