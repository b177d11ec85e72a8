/**
 * The OAuth 2.0 Device Authorization Grant (RFC 8628) for `kube-stream-proxy login`, through
 * `openid-client`: the device authorization request, the verification URL and user code printed on
 * stderr (kubectl shows the plugin's stderr; stdout carries only the ExecCredential), then polling
 * the token endpoint at the server's `interval` (5 s when it gives none), slower by 5 s on
 * `slow_down`, still on `authorization_pending` (both handled by openid-client), and a clear error
 * for `expired_token`, `access_denied` or the code's `expires_in` passing.
 */
import * as client from 'openid-client';
import { oauthErrorText } from './oidc-client.js';

/** The tokens a grant returns. */
export interface GrantTokens {
  id_token: string;
  refresh_token?: string;
}

/** The device flow's failure, with a message meant for the user. */
export class DeviceFlowError extends Error {
  override readonly name = 'DeviceFlowError';
  readonly code = 'KSP_ERR_DEVICE_FLOW' as const;
}

/** Run the device flow; `print` writes a line to stderr. */
export async function deviceFlow(config: client.Configuration, scopes: string[], print: (line: string) => void, signal?: AbortSignal): Promise<GrantTokens> {
  let auth: client.DeviceAuthorizationResponse;
  try {
    auth = await client.initiateDeviceAuthorization(config, { scope: scopes.join(' ') });
  } catch (err) {
    throw new DeviceFlowError(`device authorization request failed: ${oauthErrorText(err)}`, { cause: err });
  }
  if (auth.verification_uri_complete) {
    print(`Please visit the following URL in your browser: ${auth.verification_uri_complete}`);
    print(`(or open ${auth.verification_uri} and enter the code ${auth.user_code})`);
  } else {
    print(`Please visit the following URL in your browser: ${auth.verification_uri}`);
    print(`Please enter the following code when asked in your browser: ${auth.user_code}`);
  }
  let tokens: client.TokenEndpointResponse;
  const started = Date.now();
  try {
    tokens = await client.pollDeviceAuthorizationGrant(config, auth, undefined, signal ? { signal } : {});
  } catch (err) {
    if (err instanceof client.ResponseBodyError && err.error === 'expired_token') {
      throw new DeviceFlowError('the device code expired before it was approved; run the command again', { cause: err });
    }
    if (err instanceof client.ResponseBodyError && err.error === 'access_denied') {
      throw new DeviceFlowError('the login was denied in the browser', { cause: err });
    }
    // openid-client stops polling with OAUTH_TIMEOUT when the code's expires_in has passed (a single
    // slow request times out the same way, sooner).
    const expired = Date.now() - started >= auth.expires_in * 1000 - 1000;
    if (((err as { code?: string })?.code === 'OAUTH_TIMEOUT' && expired) || signal?.aborted) {
      throw new DeviceFlowError('the device code expired before it was approved; run the command again', { cause: err });
    }
    throw new DeviceFlowError(`device code grant failed: ${oauthErrorText(err)}`, { cause: err });
  }
  if (!tokens.id_token) throw new DeviceFlowError('the provider returned no id_token (is the "openid" scope allowed for this client?)');
  return { id_token: tokens.id_token, ...(tokens.refresh_token ? { refresh_token: tokens.refresh_token } : {}) };
}
