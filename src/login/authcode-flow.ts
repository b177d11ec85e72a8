/**
 * The authorization code flow with PKCE (S256) and a loopback redirect (RFC 8252) for
 * `kube-stream-proxy login --browser`, through `openid-client`: a one-shot HTTP server on
 * 127.0.0.1 (a random port unless `--listen-address` says otherwise) receives the redirect to
 * `http://127.0.0.1:PORT/callback`; the authorization URL is printed on stderr and opened with
 * `xdg-open` when that program exists (unless `--skip-open-browser`). `state` and `nonce` are
 * checked by openid-client when the code is exchanged.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as client from 'openid-client';
import type { GrantTokens } from './device-flow.js';
import { oauthErrorText } from './oidc-client.js';

/** Path of the redirect URI on the loopback server. */
export const CALLBACK_PATH = '/callback';

/** Options of {@link authcodeFlow}. */
export interface AuthcodeOptions {
  scopes: string[];
  /** `HOST:PORT` to listen on (default `127.0.0.1:0`: a random port). */
  listenAddress?: string;
  skipOpenBrowser?: boolean;
  /** Extra authorization request parameters (`--oidc-auth-request-extra-params`). */
  extraParams?: Record<string, string>;
  timeoutMs: number;
  print: (line: string) => void;
}

/** The authorization code flow's failure, with a message meant for the user. */
export class AuthcodeFlowError extends Error {
  override readonly name = 'AuthcodeFlowError';
  readonly code = 'KSP_ERR_AUTHCODE_FLOW' as const;
}

function listen(address: string): Promise<Server> {
  const colon = address.lastIndexOf(':');
  const host = colon < 0 ? '127.0.0.1' : address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(colon < 0 ? address : address.slice(colon + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new AuthcodeFlowError(`--listen-address ${address}: not HOST:PORT`);
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/** Open `url` with xdg-open if it is installed (errors, including its absence, are ignored). */
function openBrowser(url: string): void {
  try {
    const child = spawn('xdg-open', [url], { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch {
    // no browser opener: the printed URL is enough
  }
}

const page = (title: string): string => `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${title}</title></head><body><p>${title}</p></body></html>`;

/** Run the flow; resolves with the tokens once the browser came back with a code. */
export async function authcodeFlow(config: client.Configuration, o: AuthcodeOptions): Promise<GrantTokens> {
  const server = await listen(o.listenAddress ?? '127.0.0.1:0');
  try {
    const { port, address } = server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    const redirectUri = `http://${host}:${port}${CALLBACK_PATH}`;
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const url = client.buildAuthorizationUrl(config, {
      ...o.extraParams,
      redirect_uri: redirectUri,
      scope: o.scopes.join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    o.print(`Please visit the following URL in your browser: ${url.href}`);
    if (!o.skipOpenBrowser) openBrowser(url.href);
    return await new Promise<GrantTokens>((resolve, reject) => {
      const timer = setTimeout(() => reject(new AuthcodeFlowError(`no answer from the browser within ${Math.round(o.timeoutMs / 1000)} s`)), o.timeoutMs);
      const done = (fn: () => void): void => {
        clearTimeout(timer);
        fn();
      };
      server.on('request', (req, res) => {
        const current = new URL(req.url ?? '/', redirectUri);
        if (req.method !== 'GET' || current.pathname !== CALLBACK_PATH) {
          res.writeHead(404, { 'content-type': 'text/html' }).end(page('Not found'));
          return;
        }
        client
          .authorizationCodeGrant(config, current, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true })
          .then((tokens) => {
            res.writeHead(200, { 'content-type': 'text/html' }).end(page('Authenticated. You can close this window and return to the terminal.'));
            done(() => resolve({ id_token: tokens.id_token!, ...(tokens.refresh_token ? { refresh_token: tokens.refresh_token } : {}) }));
          })
          .catch((err: unknown) => {
            res.writeHead(400, { 'content-type': 'text/html' }).end(page('Authentication failed. See the terminal.'));
            done(() => reject(new AuthcodeFlowError(`authorization code grant failed: ${oauthErrorText(err)}`, { cause: err })));
          });
      });
    });
  } finally {
    server.closeAllConnections();
    server.close();
  }
}
