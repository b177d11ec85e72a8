/**
 * The request headers a proxy sends upstream: the client's lines with hop-by-hop headers removed
 * (RFC 9110 §7.6.1, plus every header named in `Connection`), `Host` set to the upstream,
 * `X-Forwarded-For/Proto/Host` added, and the proxy's own upstream credentials applied.
 * Header values are byte strings, as Node reads them; `request-head.ts` writes them.
 */

/**
 * Hop-by-hop headers, lower-case. RFC 9110 lists Connection, Proxy-Connection, Keep-Alive, TE,
 * Transfer-Encoding and Upgrade; Go's ReverseProxy adds Proxy-Authenticate, Proxy-Authorization and
 * Trailer (the RFC 2616 list), which we follow.
 */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** A header line as `[name, value]`, name case as received. */
export type HeaderPair = [string, string];

/** Turn Node's flat `rawHeaders` (`[name, value, name, value, …]`) into pairs. */
export function pairsFromRaw(raw: readonly string[]): HeaderPair[] {
  const out: HeaderPair[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}

/** Flatten pairs back into Node's raw array form (accepted by `http.request` and `writeHead`). */
export function rawFromPairs(pairs: readonly HeaderPair[]): string[] {
  return pairs.flat();
}

/** Lower-case names listed in every `Connection` line (`close`, `upgrade`, `keep-alive` included). */
export function connectionTokens(pairs: readonly HeaderPair[]): Set<string> {
  const tokens = new Set<string>();
  for (const [name, value] of pairs) {
    if (name.toLowerCase() !== 'connection') continue;
    for (const t of value.split(',')) if (t.trim() !== '') tokens.add(t.trim().toLowerCase());
  }
  return tokens;
}

/**
 * End-to-end headers that `Connection` may never remove: the message's framing and its `Host`. A
 * `Connection: Content-Length` would otherwise strip the length of a body the parser has already
 * framed by it, and the body would go on unframed (docs/security.md, "Request framing and smuggling").
 */
export const NEVER_CONNECTION_NAMED: ReadonlySet<string> = new Set(['content-length', 'host']);

/**
 * Remove hop-by-hop headers and the ones `Connection` names (never {@link NEVER_CONNECTION_NAMED}).
 * `keep(lowerName)` may spare a header that `Connection` names (the upgrade path keeps
 * `X-Stream-Protocol-Version` and `Sec-WebSocket-*` whatever the client listed).
 */
export function stripHopByHop(pairs: readonly HeaderPair[], keep: (lowerName: string) => boolean = () => false): HeaderPair[] {
  const named = connectionTokens(pairs);
  return pairs.filter(([name]) => {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP_HEADERS.has(lower)) return false;
    return !named.has(lower) || keep(lower) || NEVER_CONNECTION_NAMED.has(lower);
  });
}

/** What the proxy knows about the client connection. */
export interface ClientInfo {
  /** Client IP (the socket's remote address). */
  remoteAddress: string | undefined;
  /** Scheme the client used to reach us. */
  proto: 'http' | 'https';
  /** The `Host` header the client sent. */
  host: string | undefined;
}

/**
 * Append the client to `X-Forwarded-For` (earlier values joined with `, ` into one line, as Go's
 * `AppendForwardedForHeader` does) and set `X-Forwarded-Proto` and `X-Forwarded-Host` (replacing any
 * the client sent: they describe the hop into this proxy).
 */
export function withForwardedHeaders(pairs: readonly HeaderPair[], client: ClientInfo): HeaderPair[] {
  const prior: string[] = [];
  const out: HeaderPair[] = [];
  for (const pair of pairs) {
    const lower = pair[0].toLowerCase();
    if (lower === 'x-forwarded-for') prior.push(pair[1]);
    else if (lower !== 'x-forwarded-proto' && lower !== 'x-forwarded-host') out.push(pair);
  }
  const ip = client.remoteAddress?.replace(/^::ffff:/, '');
  if (ip !== undefined) prior.push(ip);
  if (prior.length > 0) out.push(['X-Forwarded-For', prior.join(', ')]);
  out.push(['X-Forwarded-Proto', client.proto]);
  if (client.host !== undefined) out.push(['X-Forwarded-Host', client.host]);
  return out;
}

/**
 * Replace (case-insensitively) or add headers: each given name ends up with exactly the given value,
 * or with one line per value when given a list.
 */
export function setHeaders(pairs: readonly HeaderPair[], set: Record<string, string | readonly string[]>): HeaderPair[] {
  const lowerNames = new Set(Object.keys(set).map((n) => n.toLowerCase()));
  const out = pairs.filter(([name]) => !lowerNames.has(name.toLowerCase()));
  for (const [name, value] of Object.entries(set)) {
    if (typeof value === 'string') out.push([name, value]);
    else for (const v of value) out.push([name, v]);
  }
  return out;
}
