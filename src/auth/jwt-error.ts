/**
 * The JWT authenticator's one error: a token that names this authenticator's issuer ("mine") and is
 * not valid. Its `reason` is a closed set (tests and logs switch on it), its message is
 * kube-apiserver's text for the same failure (`oidc: ...`). Neither ever contains the token: messages
 * are built from configuration, claim names and (truncated) claim values only. The caller answers
 * 401 `Unauthorized` (kube-apiserver does not tell the client why) and logs the message.
 */

/** Why a token was refused. */
export type JwtFailureReason =
  /** The token is over {@link MAX_TOKEN_BYTES}. */
  | 'too_large'
  /** The issuer's keys are not known yet (discovery or JWKS not fetched). */
  | 'not_initialized'
  /** Not a well-formed compact JWS with a JSON payload (bad base64url, bad JSON, nested or `crit`). */
  | 'malformed'
  /** `alg` outside the allowed asymmetric list (`none`, HS*, EdDSA...). */
  | 'unsupported_algorithm'
  /** No key of the issuer's JWKS fits the token's `kid`/`alg`, even after a refresh. */
  | 'unknown_key'
  /** The signature does not verify. */
  | 'invalid_signature'
  | 'audience'
  | 'expired'
  | 'not_yet_valid'
  /** A claim mapping failed (claim missing or of the wrong type, bad expression result). */
  | 'claim_mapping'
  /** The username claim is `email` and `email_verified` is not true. */
  | 'email_not_verified'
  /** A `claim`/`requiredValue` rule failed. */
  | 'required_claim'
  /** A claim validation expression was false. */
  | 'claim_validation'
  /** A user validation expression was false. */
  | 'user_validation'
  /** A CEL expression failed at run time. */
  | 'expression_error';

/** The largest token looked at (bytes of its compact form); kube-apiserver has no such limit. */
export const MAX_TOKEN_BYTES = 16 * 1024;

/** A claim value as it may appear in an error message: at most this many characters. */
const MAX_VALUE_CHARS = 64;

/** A claim value shortened for a message (claims are the caller's data; the message is logged). */
export function messageValue(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? String(v);
  return s.length > MAX_VALUE_CHARS ? `${s.slice(0, MAX_VALUE_CHARS)}...` : s;
}

/** A token for this authenticator's issuer that is not valid. */
export class JwtAuthenticationError extends Error {
  override readonly name = 'JwtAuthenticationError';
  readonly code = 'KSP_ERR_JWT_INVALID' as const;
  constructor(
    readonly reason: JwtFailureReason,
    message: string,
    /** The configured issuer URL whose authenticator refused the token (empty when none matched). */
    readonly issuer = '',
  ) {
    super(message);
  }
}
