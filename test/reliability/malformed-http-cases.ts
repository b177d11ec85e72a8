/**
 * The HTTP half of the malformed-input catalogue: raw request bytes sent to the proxy on a fresh
 * `net` connection, and the exact answer expected. `expected` is the canonical form the test builds
 * from what it observed (see `describeHttp` in malformed-http.test.ts):
 *
 * - `STATUS Reason "message"` for a JSON Status body (`kind: Status`), e.g. `400 BadRequest "…"`;
 * - `STATUS (empty body)` or `STATUS text "…"` for other bodies (an upstream answer relayed verbatim);
 * - `101 <subprotocol> served` when the request upgrades and the session then works;
 * - `, closed` when the server closes the connection after its answer.
 */
import type { CatalogueRow } from './malformed-fixture.js';

/** What to do after a 101: run a short session on the same connection (or read its channel-3 Status). */
export type ServeCheck = 'v5' | 'v5-tty' | 'ws-legacy' | 'v5-status';

/** One HTTP case. */
export interface HttpCase extends CatalogueRow {
  /** Request bytes, or parts written one after the other. */
  request: string | Buffer | Array<string | Buffer>;
  /** After a 101, prove the session is served. */
  serve?: ServeCheck;
  /** The number of complete answers to read (pipelining cases); default 1. */
  answers?: number;
}

const EXEC_Q = 'command=cat&stdin=true&stdout=true&stderr=true';
const path = (q = EXEC_Q, pod = 'demo', ns = 'default', sub = 'exec'): string => `/api/v1/namespaces/${ns}/pods/${pod}/${sub}?${q}`;
const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';

/** A request head from lines (CRLF added), ending with the blank line. */
const head = (start: string, ...lines: string[]): string => [start, ...lines, '', ''].join('\r\n');
const GET = (p = path()): string => `GET ${p} HTTP/1.1`;
const POST = (p = path()): string => `POST ${p} HTTP/1.1`;
const HOST = 'Host: proxy.test';
const WS_HEADERS = [HOST, 'Connection: Upgrade', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13'];
const V5 = 'Sec-WebSocket-Protocol: v5.channel.k8s.io';
/** A v5 WebSocket exec upgrade for `p` with extra lines. */
const wsV5 = (p = path(), ...extra: string[]): string => head(GET(p), ...WS_HEADERS, V5, ...extra);
const spdy = (p = path('command=cat&stdin=1&stdout=1&stderr=1'), ...extra: string[]): string =>
  head(POST(p), HOST, 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v4.channel.k8s.io', 'Content-Length: 0', ...extra);
const UPGRADE_REQUIRED = '400 BadRequest "Upgrade request required"';
const NO_STREAMS = '400 BadRequest "you must specify at least 1 of stdin, stdout, stderr", closed';
const invalidName = (field: 'namespace' | 'name', value: string, label: boolean): string =>
  `400 BadRequest ${JSON.stringify(
    `invalid ${field} ${JSON.stringify(value)}: ` +
      (label
        ? "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        : "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
  )}, closed`;
const DISGUISED = '400 BadRequest "pods/exec, pods/attach and pods/portforward must be requested with GET or POST at /api/v1/namespaces/NAMESPACE/pods/NAME/SUBRESOURCE", closed';

const ORIGIN_FORM = '400 BadRequest "the request-target must be in origin form: a path starting with \\"/\\"", closed';

/** Fastify's own answer to a request Node's parser rejects: JSON, but not a Kubernetes Status. */
const STATUS_400 = '400 Status BadRequest, closed';
const STATUS_431 = '431 Status RequestHeaderFieldsTooLarge (Go answers 431 only past 1 MiB), closed';

export const HTTP_CASES: HttpCase[] = [
  // ---- Connection / Upgrade combinations ----
  { id: 'H01', title: 'WebSocket v5 headers without `Connection`', request: head(GET(), HOST, 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13', V5), expected: UPGRADE_REQUIRED, basis: 'apiserver UpgradeAwareHandler `UpgradeRequired` (400 Upgrade request required)' },
  { id: 'H02', title: '`Connection: Upgrade` without `Upgrade`', request: head(GET(), HOST, 'Connection: Upgrade', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13', V5), expected: UPGRADE_REQUIRED, basis: 'same' },
  { id: 'H03', title: '`Connection: keep-alive` with `Upgrade: websocket`', request: head(GET(), HOST, 'Connection: keep-alive', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13', V5), expected: UPGRADE_REQUIRED, basis: 'same' },
  { id: 'H04', title: '`Connection: close` with `Upgrade: websocket`', request: head(GET(), HOST, 'Connection: close', 'Upgrade: websocket', V5), expected: `${UPGRADE_REQUIRED}, closed`, basis: 'same; Connection: close honoured' },
  { id: 'H05', title: '`Connection: Upgrade` with an empty `Upgrade:` value', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: ', V5), expected: "400 BadRequest \"Upgrade request required\"", basis: 'no upgrade protocol: not an upgrade' },
  { id: 'H06', title: '`Upgrade: h2c` (neither SPDY nor WebSocket)', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: h2c'), expected: "400 BadRequest \"unsupported upgrade protocol \\\"h2c\\\"\", closed", basis: 'passthrough; the kubelet refuses (400), relayed verbatim' },
  { id: 'H07', title: 'SPDY upgrade without `X-Stream-Protocol-Version`', request: head(POST(path('command=cat&stdin=1&stdout=1')), HOST, 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'Content-Length: 0'), expected: "400 text \"unable to upgrade: X-Stream-Protocol-Version is required\\n\", closed", basis: 'kubelet `httpstream.Handshake`: 400, relayed verbatim' },
  { id: 'H08', title: 'SPDY upgrade offering only unknown versions', request: head(POST(path('command=cat&stdin=1&stdout=1')), HOST, 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v9.channel.k8s.io', 'Content-Length: 0'), expected: "403 text \"unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io], server accepts [v4.channel.k8s.io \", closed", basis: 'kubelet `httpstream.Handshake`: 403 + X-Accepted-Stream-Protocol-Versions, relayed verbatim' },
  { id: 'H09', title: 'v5 WebSocket without `Sec-WebSocket-Key`', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', V5), expected: "400 BadRequest \"Missing or invalid Sec-WebSocket-Key header\", closed", basis: 'RFC 6455 §4.2.1; gorilla/x-net: 400' },
  { id: 'H10', title: '`Sec-WebSocket-Key` that is not 16 base64 bytes', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Key: abc', 'Sec-WebSocket-Version: 13', V5), expected: "400 BadRequest \"Missing or invalid Sec-WebSocket-Key header\", closed", basis: 'RFC 6455 §4.2.1: 400' },
  { id: 'H11', title: 'two `Sec-WebSocket-Key` lines', request: head(GET(), ...WS_HEADERS, `Sec-WebSocket-Key: ${KEY}`, V5), expected: "400 BadRequest \"Missing or invalid Sec-WebSocket-Key header\", closed", basis: 'RFC 6455 §4.2.1: 400' },
  { id: 'H12', title: '`Sec-WebSocket-Version: 8`', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 8', V5), serve: 'v5', expected: '400 BadRequest "Missing or invalid Sec-WebSocket-Version header", closed', basis: 'gorilla `websocket: unsupported version`, RFC 6455 §4.4' },
  { id: 'H13', title: 'no `Sec-WebSocket-Version`', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, V5), expected: "400 BadRequest \"Missing or invalid Sec-WebSocket-Version header\", closed", basis: 'RFC 6455 §4.2.1: 400' },
  { id: 'H14', title: '`Sec-WebSocket-Version: abc`', request: head(GET(), HOST, 'Connection: Upgrade', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: abc', V5), expected: "400 BadRequest \"Missing or invalid Sec-WebSocket-Version header\", closed", basis: 'RFC 6455 §4.2.1: 400' },
  { id: 'H15', title: 'v5 WebSocket upgrade with POST', request: head(POST(), ...WS_HEADERS, V5, 'Content-Length: 0'), expected: "405 MethodNotAllowed \"Invalid HTTP method\", closed", basis: 'gorilla/x-net: 405 for a non-GET WebSocket' },
  { id: 'H16', title: 'v5 WebSocket upgrade with PUT', request: head(`PUT ${path()} HTTP/1.1`, ...WS_HEADERS, V5, 'Content-Length: 0'), expected: "400 BadRequest \"pods/exec, pods/attach and pods/portforward must be requested with GET or POST at /api/v1/namespaces/NAMESPACE/pods/NAME/SUBRESOURCE\", closed", basis: 'exec is GET/POST only: refused before any upstream' },
  { id: 'H17', title: 'WebSocket with no `Sec-WebSocket-Protocol` at all', request: head(GET(), ...WS_HEADERS), serve: 'ws-legacy', expected: "101 (no subprotocol) served", basis: 'not v5: passthrough; the kubelet picks "" (binary v1)' },
  { id: 'H18', title: 'empty `Sec-WebSocket-Protocol:` line', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: '), serve: 'ws-legacy', expected: "400 text \"Invalid Sec-WebSocket-Protocol header\", closed", basis: 'same as no header (x/net trims it to "")' },
  { id: 'H19', title: 'only an unknown subprotocol', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: foo.k8s.io'), expected: "403 (empty body), closed", basis: 'passthrough; kubelet (x/net) 403 empty body, relayed' },
  { id: 'H20', title: 'v5 only on the SECOND `Sec-WebSocket-Protocol` line', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: foo.k8s.io', V5), expected: "403 (empty body), closed", basis: 'predicate reads the first line only (`IsWebSocketRequestWithStreamCloseProtocol`): passthrough, kubelet 403' },
  { id: 'H21', title: '`V5.CHANNEL.K8S.IO` (wrong case)', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: V5.CHANNEL.K8S.IO'), expected: "403 (empty body), closed", basis: 'Go `==`: not v5; passthrough, kubelet 403' },
  { id: 'H22', title: 'absurd list: 500 junk entries, then v5', request: head(GET(), ...WS_HEADERS, `Sec-WebSocket-Protocol: ${Array.from({ length: 500 }, (_, i) => `junk${i}`).join(', ')}, v5.channel.k8s.io`), serve: 'v5', expected: "101 v5.channel.k8s.io served", basis: 'v5 is in the first line: translated' },
  { id: 'H23', title: 'absurd list: 5,000 entries (40 KB header)', request: head(GET(), ...WS_HEADERS, `Sec-WebSocket-Protocol: ${Array.from({ length: 5000 }, (_, i) => `j${i}`).join(',')}`), expected: '431 RequestHeaderFieldsTooLarge "Request Header Fields Too Large", closed', basis: 'header too large' },
  { id: 'H24', title: 'v4 and v5 offered (v4 first)', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: v4.channel.k8s.io, v5.channel.k8s.io'), serve: 'v5', expected: "101 v5.channel.k8s.io served", basis: 'translator answers only v5' },
  { id: 'H25', title: 'exec offering only the port-forward tunnel protocol', request: head(GET(), ...WS_HEADERS, 'Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io'), expected: "403 (empty body), closed", basis: 'exec does not tunnel: passthrough, kubelet 403' },
  { id: 'H26', title: 'portforward WebSocket offering v5 (no tunnel, no ports)', request: head(GET(path('', 'demo', 'default', 'portforward')), ...WS_HEADERS, V5), expected: "400 BadRequest \"query parameter \\\"port\\\" is required\", closed", basis: 'legacy WS port-forward: kubelet 400 `query parameter "port" is required`' },
  { id: 'H27', title: 'portforward tunnel without `Sec-WebSocket-Key`', request: head(GET(path('', 'demo', 'default', 'portforward')), HOST, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io'), expected: "400 BadRequest \"error upgrading websocket connection: Missing or invalid Sec-WebSocket-Key header\", closed", basis: 'apiserver streamtunnel: gorilla refuses the client handshake (400)' },
  { id: 'H28', title: 'portforward `SPDY/3.1+foo` (no `.k8s.io` suffix)', request: head(GET(path('', 'demo', 'default', 'portforward')), ...WS_HEADERS, 'Sec-WebSocket-Protocol: SPDY/3.1+foo'), expected: "400 BadRequest \"query parameter \\\"port\\\" is required\", closed", basis: 'not a tunneling protocol: passthrough, kubelet 400 (no port)' },
  { id: 'H29', title: '`Upgrade: WebSocket` / `connection: upgrade` (other case)', request: head(GET(), HOST, 'connection: upgrade', 'Upgrade: WebSocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13', V5), serve: 'v5', expected: "101 v5.channel.k8s.io served", basis: 'case-insensitive (`IsWebSocketRequest`)' },
  { id: 'H30', title: '`Connection: keep-alive, Upgrade` and a garbage `Sec-WebSocket-Extensions`', request: head(GET(), HOST, 'Connection: keep-alive, Upgrade', 'Upgrade: websocket', `Sec-WebSocket-Key: ${KEY}`, 'Sec-WebSocket-Version: 13', V5, 'Sec-WebSocket-Extensions: x;;;=,,permessage-deflate; foo'), serve: 'v5', expected: "101 v5.channel.k8s.io served", basis: 'no extension is negotiated; extension offers are ignored' },

  // ---- Content-Length / Transfer-Encoding (no smuggling) ----
  { id: 'H31', title: 'SPDY upgrade with `Content-Length` and `Transfer-Encoding: chunked`', request: spdy(undefined, 'Transfer-Encoding: chunked'), expected: '400 BadRequest "Bad Request: HPE_INVALID_TRANSFER_ENCODING", closed', basis: 'RFC 9112 §6.1: reject; Go net/http 400' },
  { id: 'H32', title: 'two different `Content-Length` values', request: head(POST(), HOST, 'Content-Length: 0', 'Content-Length: 5', '') + 'hello', expected: '400 BadRequest "Bad Request: HPE_UNEXPECTED_CONTENT_LENGTH", closed', basis: 'RFC 9112 §6.3: 400' },
  { id: 'H33', title: '`Content-Length: -1`', request: head(POST(), HOST, 'Content-Length: -1'), expected: '400 BadRequest "Bad Request: HPE_INVALID_CONTENT_LENGTH", closed', basis: '400' },
  { id: 'H34', title: '`Content-Length: 1e3`', request: head(POST(), HOST, 'Content-Length: 1e3'), expected: '400 BadRequest "Bad Request: HPE_INVALID_CONTENT_LENGTH", closed', basis: '400' },
  { id: 'H35', title: '`Transfer-Encoding: chunked, gzip` (chunked not last)', request: head(POST(), HOST, 'Transfer-Encoding: chunked, gzip'), expected: '400 BadRequest "Bad Request: HPE_INVALID_TRANSFER_ENCODING", closed', basis: 'RFC 9112 §6.3: 400' },
  { id: 'H36', title: 'smuggling via Content-Length: a request hidden in the body, then /livez', request: [head(POST(), HOST, `Content-Length: ${Buffer.byteLength(wsV5())}`) + wsV5(), head('GET /livez HTTP/1.1', HOST)], answers: 2, expected: "400 BadRequest \"Upgrade request required\" + 200 text \"ok\"", basis: 'the body is a body: exactly two answers (400, then /livez 200)' },
  { id: 'H37', title: 'smuggling via chunked body, then /livez', request: [head(POST(), HOST, 'Transfer-Encoding: chunked') + `${Buffer.byteLength(wsV5()).toString(16)}\r\n${wsV5()}\r\n0\r\n\r\n`, head('GET /livez HTTP/1.1', HOST)], answers: 2, expected: "400 BadRequest \"Upgrade request required\" + 200 text \"ok\"", basis: 'same' },
  { id: 'H38', title: 'bad chunk size after a refused exec POST', request: head(POST(), HOST, 'Transfer-Encoding: chunked') + 'zz\r\nhello\r\n0\r\n\r\n', expected: '400 BadRequest "Bad Request: HPE_INVALID_CHUNK_SIZE", closed', basis: 'answered, then the broken body ends the connection' },
  { id: 'H39', title: 'WebSocket v5 GET with `Transfer-Encoding: chunked`', request: head(GET(), ...WS_HEADERS, V5, 'Transfer-Encoding: chunked'), expected: '400 BadRequest "an upgrade request must not carry a body (Transfer-Encoding or a non-zero Content-Length)", closed', basis: 'ambiguous: Go treats the bytes after the head as frames, Node 26 swallows them as a chunked body (Node 20 does not): refused on every runtime, never lost' },

  // ---- Request framing and smuggling (issue 25): nothing reaches the upstream unframed or before a 101 ----
  // (Bodies framed on the way up are asserted on the upstream's side in test/security/smuggling.test.ts:
  // a request answered by the upstream leaves a pooled keep-alive connection, which this fixture's
  // descriptor check would count.)
  { id: 'H75', title: 'absolute-form target `GET http://evil/api/v1/namespaces`', request: head('GET http://evil/api/v1/namespaces HTTP/1.1', HOST), expected: ORIGIN_FORM, basis: 'only origin-form reaches routing and authorization (stricter than Go, which routes the path)' },
  { id: 'H76', title: 'absolute-form SPDY exec upgrade `POST http://evil/api/v1/…/exec`', request: spdy(`http://evil${path('command=cat&stdin=1&stdout=1')}`), expected: ORIGIN_FORM, basis: 'same: `podStreamAttributes` and the kubelet locator read the path' },
  { id: 'H77', title: 'asterisk-form `OPTIONS * HTTP/1.1`', request: head('OPTIONS * HTTP/1.1', HOST), expected: ORIGIN_FORM, basis: 'same' },
  { id: 'H78', title: '`Transfer-Encoding: gzip, chunked` (chunked last)', request: head(POST('/api/v1/namespaces/default/pods'), HOST, 'Transfer-Encoding: gzip, chunked') + '3\r\nabc\r\n0\r\n\r\n', expected: '501 NotImplemented "unsupported transfer encoding: \\"gzip, chunked\\"", closed', basis: 'Go net/http: 501 Unsupported transfer encoding; never re-framed without its coding' },
  { id: 'H80', title: 'WebSocket upgrade on a path that is no upgrade endpoint, a request right behind its head', request: head('GET /version HTTP/1.1', ...WS_HEADERS) + head('DELETE /api/v1/namespaces/default/pods/demo HTTP/1.1', 'Host: x'), expected: '404 NotFound "the server could not find the requested resource", closed', basis: 'UpgradeAwareHandler: client bytes only after the 101; the upstream\'s answer relayed, then closed' },
  { id: 'H81', title: '`POST /healthz` with an Upgrade header (not the proxy\'s own endpoint)', request: head('POST /healthz HTTP/1.1', ...WS_HEADERS, 'Content-Length: 0'), expected: '404 NotFound "the server could not find the requested resource", closed', basis: 'own endpoints are GET and HEAD only; anything else is routed (and, in impersonate mode, authenticated)' },
  { id: 'H82', title: 'SPDY upgrade pipelined behind `GET /livez`', request: head('GET /livez HTTP/1.1', HOST) + head(POST(path('command=cat&stdin=1&stdout=1')), HOST, 'Connection: Upgrade', 'Upgrade: SPDY/3.1', 'X-Stream-Protocol-Version: v9.channel.k8s.io', 'Content-Length: 0'), answers: 2, expected: '200 text "ok" + 403 text "unable to upgrade: unable to negotiate protocol: client supports [v9.channel.k8s.io], server accepts [v4.channel.k8s.io ", closed', basis: 'answered after the request before it (ERR_HTTP_SOCKET_ASSIGNED took the proxy down before)' },

  // ---- Oversized and broken heads ----
  { id: 'H40', title: 'one 17 KiB header line', request: head(GET(), ...WS_HEADERS, V5, `X-Big: ${'a'.repeat(17 * 1024)}`), expected: '431 RequestHeaderFieldsTooLarge "Request Header Fields Too Large", closed', basis: '431 (Node limit 16 KiB; Go 1 MiB)' },
  { id: 'H41', title: '17 KiB request target', request: head(GET(path(`${EXEC_Q}&x=${'a'.repeat(17 * 1024)}`)), ...WS_HEADERS, V5), expected: '431 RequestHeaderFieldsTooLarge "Request Header Fields Too Large", closed', basis: '431' },
  { id: 'H42', title: '500 small header lines (4 KiB)', request: head(GET(), ...WS_HEADERS, V5, ...Array.from({ length: 500 }, (_, i) => `X-${i}: 1`)), serve: 'v5', expected: '101 v5.channel.k8s.io served', basis: 'within Go and Node limits: served' },
  { id: 'H43', title: 'header name with a space', request: head(GET(), ...WS_HEADERS, V5, 'Bad Header: x'), expected: '400 BadRequest "Bad Request: HPE_INVALID_HEADER_TOKEN", closed', basis: 'RFC 9112 §5: 400' },
  { id: 'H44', title: 'header value with a NUL byte', request: head(GET(), ...WS_HEADERS, V5, 'X-Nul: a\u0000b'), expected: '400 BadRequest "Bad Request: HPE_INVALID_HEADER_TOKEN", closed', basis: 'RFC 9110 §5.5: 400' },
  { id: 'H45', title: 'garbage request line', request: 'GARBAGE\r\n\r\n', expected: '400 BadRequest "Bad Request: HPE_INVALID_METHOD", closed', basis: '400' },
  { id: 'H46', title: 'HTTP/2 connection preface', request: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', expected: '400 BadRequest "Bad Request: HPE_PAUSED_H2_UPGRADE", closed', basis: 'HTTP/1.1 only on this listener' },
  { id: 'H47', title: 'no `Host` header (HTTP/1.1)', request: head(GET(), ...WS_HEADERS.slice(1), V5), serve: 'v5', expected: '400 BadRequest "missing required Host header", closed', basis: 'RFC 9112 §3.2, Go net/http: 400 missing required Host header' },
  { id: 'H48', title: 'obsolete line folding in a header', request: head(GET(), ...WS_HEADERS, V5, 'X-Fold: a', ' b'), expected: '400 BadRequest "Bad Request: HPE_INVALID_HEADER_TOKEN", closed', basis: 'RFC 9112 §5.2: reject (400)' },
  { id: 'H49', title: 'bare LF line ends', request: `GET ${path()} HTTP/1.1\n${[...WS_HEADERS, V5].join('\n')}\n\n`, expected: '400 BadRequest "Bad Request: HPE_INVALID_VERSION", closed', basis: 'lenient or 400; never a hang' },

  // ---- Names: encoded slashes, dot segments, invalid names ----
  { id: 'H50', title: 'pod `de%2Fmo` (encoded slash)', request: wsV5(path(EXEC_Q, 'de%2Fmo')), expected: invalidName('name', 'de/mo', false), basis: 'apiserver name validation (DNS-1123 subdomain)' },
  { id: 'H51', title: 'pod `..`', request: wsV5(path(EXEC_Q, '..')), expected: "400 BadRequest \"invalid name \\\"..\\\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character\", closed", basis: 'dot segment never reaches the upstream' },
  { id: 'H52', title: 'pod `%2E%2E`', request: wsV5(path(EXEC_Q, '%2E%2E')), expected: invalidName('name', '..', false), basis: 'same' },
  { id: 'H53', title: 'namespace `..%2Fkube-system`', request: wsV5(path(EXEC_Q, 'demo', '..%2Fkube-system')), expected: invalidName('namespace', '../kube-system', true), basis: 'DNS-1123 label' },
  { id: 'H54', title: 'pod `Demo` (upper case)', request: wsV5(path(EXEC_Q, 'Demo')), expected: invalidName('name', 'Demo', false), basis: 'DNS-1123 subdomain' },
  { id: 'H55', title: 'pod name of 254 characters', request: wsV5(path(EXEC_Q, 'a'.repeat(254))), expected: "400 BadRequest \"pods/exec, pods/attach and pods/portforward must be requested with GET or POST at /api/v1/namespaces/NAMESPACE/pods/NAME/SUBRESOURCE\", closed", basis: 'longer than 253' },
  { id: 'H56', title: 'namespace of 64 characters', request: wsV5(path(EXEC_Q, 'demo', 'a'.repeat(64))), expected: "400 BadRequest \"invalid namespace \\\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\\": must be no more than 63 characters\", closed", basis: 'longer than 63' },
  { id: 'H57', title: 'pod `demo%00`', request: wsV5(path(EXEC_Q, 'demo%00')), expected: invalidName('name', 'demo\u0000', false), basis: 'DNS-1123 subdomain' },
  { id: 'H58', title: 'pod `d%C3%A9mo` (non-ASCII)', request: wsV5(path(EXEC_Q, 'd%C3%A9mo')), expected: invalidName('name', 'démo', false), basis: 'DNS-1123 subdomain' },
  { id: 'H59', title: 'pod `%ZZ` (broken percent-encoding)', request: wsV5(path(EXEC_Q, '%ZZ')), expected: '400 BadRequest "\'/api/v1/namespaces/default/pods/%ZZ/exec?command=cat&stdin=true&stdout=true&stderr=true\' is not a valid url component", closed', basis: '400, never forwarded' },
  { id: 'H60', title: 'path `pods/demo/../demo/exec`', request: wsV5(`/api/v1/namespaces/default/pods/demo/../demo/exec?${EXEC_Q}`), expected: DISGUISED, basis: 'nothing reaches exec without the exec route (reverse-proxy.ts)' },
  { id: 'H74', title: 'SPDY exec at `pods/x/%2E%2E/demo/exec` (encoded dot segment)', request: spdy(`/api/v1/namespaces/default/pods/x/%2E%2E/demo/exec?command=cat&stdin=1&stdout=1`), expected: DISGUISED, basis: 'nothing reaches exec without the exec route' },
  { id: 'H61', title: 'empty pod segment `pods//exec`', request: wsV5(`/api/v1/namespaces/default/pods//exec?${EXEC_Q}`), expected: "400 BadRequest \"invalid name \\\"\\\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character\", closed", basis: 'refused, never forwarded' },
  { id: 'H62', title: 'pod `-demo` (leading dash)', request: wsV5(path(EXEC_Q, '-demo')), expected: invalidName('name', '-demo', false), basis: 'DNS-1123 subdomain' },
  { id: 'H63', title: 'encoded slash in the subresource `pods/demo%2Fexec`', request: wsV5(`/api/v1/namespaces/default/pods/demo%2Fexec?${EXEC_Q}`), expected: "400 BadRequest \"pods/exec, pods/attach and pods/portforward must be requested with GET or POST at /api/v1/namespaces/NAMESPACE/pods/NAME/SUBRESOURCE\", closed", basis: 'disguised stream refused' },

  // ---- Query ----
  { id: 'H64', title: 'v5 exec with no stream requested', request: wsV5(path('command=cat')), expected: NO_STREAMS, basis: 'kubelet/apiserver `NewOptions`' },
  { id: 'H65', title: 'all streams false (`stdin=false&stdout=0&stderr=FALSE`)', request: wsV5(path('command=cat&stdin=false&stdout=0&stderr=FALSE')), expected: NO_STREAMS, basis: 'apimachinery bool conversion: 0/false are false' },
  { id: 'H66', title: 'tty and stderr only (`tty=true&stderr=true`)', request: wsV5(path('command=cat&tty=true&stderr=true')), expected: NO_STREAMS, basis: 'kubelet `NewOptions` drops stderr under tty, then: no stream' },
  { id: 'H67', title: 'tty with stdin, stdout and stderr', request: wsV5(path('command=cat&tty=true&stdin=true&stdout=true&stderr=true')), serve: 'v5-tty', expected: '101 v5.channel.k8s.io served', basis: 'stderr dropped under tty; served' },
  { id: 'H68', title: 'bad boolean `stdin=maybe&stdout=yes`', request: wsV5(path('command=cat&stdin=maybe&stdout=yes')), serve: 'v5', expected: '101 v5.channel.k8s.io served', basis: 'apimachinery: anything but 0/false is true' },
  { id: 'H69', title: 'empty booleans `stdin=&stdout=`', request: wsV5(path('command=cat&stdin=&stdout=')), serve: 'v5', expected: '101 v5.channel.k8s.io served', basis: 'apimachinery: the empty string is true' },
  { id: 'H70', title: 'repeated `stdin=false&stdin=true`, nothing else', request: wsV5(path('command=cat&stdin=false&stdin=true')), expected: NO_STREAMS, basis: 'only the first value counts' },
  { id: 'H71', title: 'SPDY exec with no stream requested', request: spdy(path('command=cat')), expected: '400 BadRequest \"you must specify at least 1 of stdin, stdout, stderr\", closed', basis: 'passthrough; kubelet 400, relayed' },
  { id: 'H73', title: 'non-upgrade GET on exec with a valid query', request: head(GET(), HOST), expected: UPGRADE_REQUIRED, basis: 'UpgradeRequired' },
];
