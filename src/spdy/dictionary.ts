/**
 * The SPDY/3 header compression dictionary (SPDY/3 draft §2.6.10.1), as used by moby/spdystream,
 * kubectl and the kubelet: 1,423 bytes, zlib DICTID (adler32) 0xe3c6a7c2.
 */
import assert from 'node:assert/strict';

/** Words that the dictionary stores with a 32-bit big-endian length prefix, in order. */
const PREFIXED_WORDS = [
  'options', 'head', 'post', 'put', 'delete', 'trace', 'accept', 'accept-charset', 'accept-encoding',
  'accept-language', 'accept-ranges', 'age', 'allow', 'authorization', 'cache-control', 'connection',
  'content-base', 'content-encoding', 'content-language', 'content-length', 'content-location',
  'content-md5', 'content-range', 'content-type', 'date', 'etag', 'expect', 'expires', 'from', 'host',
  'if-match', 'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since', 'last-modified',
  'location', 'max-forwards', 'pragma', 'proxy-authenticate', 'proxy-authorization', 'range', 'referer',
  'retry-after', 'server', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'vary', 'via',
  'warning', 'www-authenticate', 'method', 'get', 'status', '200 OK', 'version', 'HTTP/1.1', 'url',
  'public', 'set-cookie', 'keep-alive', 'origin',
];

/** The raw tail of the dictionary (no length prefixes, no trailing NUL). */
const TAIL =
  '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505' +
  '203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request' +
  '401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented' +
  '503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ' +
  'Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,' +
  'application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=' +
  'gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.';

function buildDictionary(): Buffer {
  const parts: Buffer[] = [];
  for (const word of PREFIXED_WORDS) {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(word.length, 0);
    parts.push(len, Buffer.from(word, 'latin1'));
  }
  parts.push(Buffer.from(TAIL, 'latin1'));
  const dict = Buffer.concat(parts);
  assert.equal(dict.length, 1423, 'SPDY/3 dictionary must be 1423 bytes');
  return dict;
}

/** The SPDY/3 zlib dictionary bytes. Do not mutate. */
export const SPDY3_DICTIONARY: Buffer = buildDictionary();

/** adler32 of {@link SPDY3_DICTIONARY}: the DICTID in a zlib stream header. */
export const SPDY3_DICTIONARY_ID = 0xe3c6a7c2;
