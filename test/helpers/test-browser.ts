/**
 * What a user's browser does on an OpenID Provider's pages, over plain HTTP(S) requests: a cookie
 * jar, redirects followed (303/302/301 become GET), and HTML forms read from the page and submitted
 * with the fields a user would fill in. Enough for oidc-provider's device-code and login pages and the
 * test provider's login and consent pages; not a general browser.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** A fetched page. */
export interface Page {
  url: string;
  status: number;
  body: string;
}

/** A form found on a page. */
export interface Form {
  action: string;
  method: string;
  fields: Record<string, string>;
}

function send(url: URL, method: string, headers: Record<string, string>, body: string | undefined, ca: string | undefined): Promise<{ res: IncomingMessage; body: string }> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ res, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const req = url.protocol === 'https:' ? httpsRequest(url, { method, headers, ...(ca ? { ca } : {}) }, onResponse) : httpRequest(url, { method, headers }, onResponse);
    req.on('error', reject);
    req.end(body);
  });
}

/** GET `url` trusting `ca`; resolves with the body of a 200, rejects otherwise. */
export async function httpsGet(url: string, ca?: string): Promise<string> {
  const { res, body } = await send(new URL(url), 'GET', {}, undefined, ca);
  if (res.statusCode !== 200) throw new Error(`GET ${url}: ${res.statusCode}`);
  return body;
}

const decode = (s: string): string => s.replace(/&#(\d+);/g, (_m, n: string) => String.fromCharCode(Number(n))).replace(/&quot;/g, '"').replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>');
const attr = (tag: string, name: string): string | undefined => new RegExp(`\\s${name}="([^"]*)"`, 'i').exec(tag)?.[1];

/** A browser with a cookie jar, trusting one CA. */
export class TestBrowser {
  readonly #cookies = new Map<string, string>();
  /** Every URL visited, in order. */
  readonly visited: string[] = [];

  constructor(readonly ca?: string) {}

  /** GET a page, following redirects. */
  get(url: string): Promise<Page> {
    return this.#go(new URL(url), 'GET', undefined);
  }

  /** Submit `form` (as found on `page`) with `values` overriding its fields. */
  submit(page: Page, form: Form, values: Record<string, string> = {}): Promise<Page> {
    const target = new URL(form.action || page.url, page.url);
    const body = new URLSearchParams({ ...form.fields, ...values }).toString();
    if (form.method.toLowerCase() === 'get') {
      target.search = body;
      return this.#go(target, 'GET', undefined);
    }
    return this.#go(target, 'POST', body);
  }

  /** The forms of a page (`id` or index to pick one with {@link form}). */
  forms(page: Page): (Form & { id?: string })[] {
    const out: (Form & { id?: string })[] = [];
    for (const m of page.body.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
      const tag = m[1]!;
      const fields: Record<string, string> = {};
      for (const i of m[2]!.matchAll(/<input\b[^>]*>/gi)) {
        const name = attr(i[0], 'name');
        if (name !== undefined) fields[name] = decode(attr(i[0], 'value') ?? '');
      }
      const id = attr(tag, 'id');
      out.push({ action: decode(attr(tag, 'action') ?? ''), method: attr(tag, 'method') ?? 'get', fields, ...(id ? { id } : {}) });
    }
    return out;
  }

  /** The form with this id, or the only/first form. */
  form(page: Page, id?: string): Form {
    const forms = this.forms(page);
    const f = id === undefined ? forms[0] : forms.find((x) => x.id === id);
    if (!f) throw new Error(`no form${id ? ` ${id}` : ''} on ${page.url} (HTTP ${page.status}): ${page.body.slice(0, 300)}`);
    return f;
  }

  async #go(url: URL, method: string, body: string | undefined): Promise<Page> {
    for (let hops = 0; hops < 20; hops++) {
      this.visited.push(url.toString());
      const headers: Record<string, string> = { accept: 'text/html' };
      const cookie = [...this.#cookies].map(([k, v]) => `${k}=${v}`).join('; ');
      if (cookie) headers.cookie = cookie;
      if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
      const r = await send(url, method, headers, body, this.ca);
      for (const c of r.res.headers['set-cookie'] ?? []) {
        const [pair] = c.split(';');
        const eq = pair!.indexOf('=');
        const name = pair!.slice(0, eq).trim();
        const value = pair!.slice(eq + 1).trim();
        if (/expires=Thu, 01 Jan 1970/i.test(c) || value === '') this.#cookies.delete(name);
        else this.#cookies.set(name, value);
      }
      const status = r.res.statusCode ?? 0;
      const location = r.res.headers.location;
      if ([301, 302, 303, 307, 308].includes(status) && location) {
        url = new URL(location, url);
        if (status !== 307 && status !== 308) {
          method = 'GET';
          body = undefined;
        }
        continue;
      }
      return { url: url.toString(), status, body: r.body };
    }
    throw new Error(`too many redirects from ${url}`);
  }
}

/**
 * What a user does in the browser for a device code on the demo/test OpenID Provider
 * (`dev/oidc-issuer.ts`): open the verification page, type the code, confirm, sign in, allow.
 * Resolves with the last page (oidc-provider's "sign-in complete" page).
 */
export async function approveDeviceCode(ca: string, verificationUri: string, userCode: string, login: string, password: string): Promise<Page> {
  const browser = new TestBrowser(ca);
  let page = await browser.get(verificationUri);
  page = await browser.submit(page, browser.form(page, 'op.deviceInputForm'), { user_code: userCode });
  page = await browser.submit(page, browser.form(page, 'op.deviceConfirmForm'));
  if (!page.body.includes('Sign in')) throw new Error(`no sign-in page after the device code (HTTP ${page.status}): ${page.body.slice(0, 300)}`);
  page = await browser.submit(page, browser.form(page, 'login'), { login, password });
  if (!page.body.includes('Authorize')) throw new Error(`sign-in as ${login} failed (HTTP ${page.status}): ${page.body.slice(0, 300)}`);
  return browser.submit(page, browser.form(page, 'consent'));
}
