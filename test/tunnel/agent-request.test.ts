/**
 * The agent's request codec: heads (split at every byte), the size cap, syntax refusals, body
 * framing (chunked split at every byte), the path policy, the rewrite per --access-as, and a fuzz
 * of random heads and bodies (never throws, always an answer).
 */
import { describe, expect, it } from 'vitest';
import {
  apiPathRefusal,
  BodyFramer,
  bodyFraming,
  isUpgradeRequest,
  MAX_REQUEST_HEAD_BYTES,
  parseRequestHead,
  rewriteRequestHead,
  type RequestHead,
} from '../../src/tunnel/agent-request.js';

const EXEC_HEAD =
  'POST /api/v1/namespaces/default/pods/alpha/exec?command=sh&stdin=true HTTP/1.1\r\n' +
  'Host: proxy.example\r\n' +
  'Authorization: Bearer caller-token\r\n' +
  'Connection: Upgrade\r\n' +
  'Upgrade: SPDY/3.1\r\n' +
  'X-Stream-Protocol-Version: v4.channel.k8s.io\r\n' +
  'Impersonate-User: alice\r\n' +
  'Impersonate-Group: devs\r\n' +
  'Content-Length: 0\r\n' +
  '\r\n';

function complete(text: string | Buffer): { head: RequestHead; length: number } {
  const r = parseRequestHead(Buffer.isBuffer(text) ? text : Buffer.from(text, 'latin1'));
  if (r.kind !== 'complete') throw new Error(`not complete: ${JSON.stringify(r)}`);
  return r;
}

describe('parseRequestHead', () => {
  it('reads an exec upgrade head and leaves the surplus', () => {
    const bytes = Buffer.from(EXEC_HEAD + 'SPDY-FRAMES', 'latin1');
    const { head, length } = complete(bytes);
    expect(head.method).toBe('POST');
    expect(head.target).toBe('/api/v1/namespaces/default/pods/alpha/exec?command=sh&stdin=true');
    expect(head.httpVersion).toBe('HTTP/1.1');
    expect(head.headers).toContainEqual(['Impersonate-Group', 'devs']);
    expect(bytes.subarray(length).toString()).toBe('SPDY-FRAMES');
    expect(isUpgradeRequest(head)).toBe(true);
  });

  it('is incomplete at every split point before the blank line, complete after it', () => {
    const bytes = Buffer.from(EXEC_HEAD, 'latin1');
    for (let i = 0; i < bytes.length; i++) expect(parseRequestHead(bytes.subarray(0, i)).kind, `at ${i}`).toBe('incomplete');
    expect(complete(bytes).length).toBe(bytes.length);
  });

  it('accepts bare LF line ends and trims values', () => {
    const { head } = complete('GET /api HTTP/1.1\nHost:   x  \n\n');
    expect(head.headers).toEqual([['Host', 'x']]);
  });

  it('refuses a head larger than the cap with a 400 Status', () => {
    const big = Buffer.from(`GET /api HTTP/1.1\r\nX-Big: ${'a'.repeat(MAX_REQUEST_HEAD_BYTES)}\r\n`, 'latin1');
    const r = parseRequestHead(big);
    expect(r.kind).toBe('invalid');
    if (r.kind === 'invalid') {
      expect(r.status).toMatchObject({ kind: 'Status', code: 400, reason: 'BadRequest' });
      expect(r.status.message).toContain(`larger than ${MAX_REQUEST_HEAD_BYTES} bytes`);
    }
    // A head that ends exactly within the cap is fine.
    expect(parseRequestHead(Buffer.from(`GET /api HTTP/1.1\r\nX: ${'a'.repeat(1000)}\r\n\r\n`), 1100).kind).toBe('complete');
  });

  it.each([
    ['no version', 'GET /api\r\n\r\n'],
    ['HTTP/2', 'GET /api HTTP/2.0\r\n\r\n'],
    ['absolute-form', 'GET http://evil.example/api HTTP/1.1\r\n\r\n'],
    ['authority-form', 'CONNECT evil.example:443 HTTP/1.1\r\n\r\n'],
    ['asterisk', 'OPTIONS * HTTP/1.1\r\n\r\n'],
    ['two spaces', 'GET  /api HTTP/1.1\r\n\r\n'],
    ['bad method', 'G(T /api HTTP/1.1\r\n\r\n'],
    ['no colon', 'GET /api HTTP/1.1\r\nHost x\r\n\r\n'],
    ['space before colon', 'GET /api HTTP/1.1\r\nHost : x\r\n\r\n'],
    ['obs-fold', 'GET /api HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n'],
    ['CR in a value', 'GET /api HTTP/1.1\r\nX-A: a\rb\r\n\r\n'],
    ['NUL in a value', 'GET /api HTTP/1.1\r\nX-A: a\u0000b\r\n\r\n'],
  ])('refuses %s with a 400 Status', (_name, text) => {
    const r = parseRequestHead(Buffer.from(text, 'latin1'));
    expect(r.kind).toBe('invalid');
    if (r.kind === 'invalid') expect(r.status).toMatchObject({ kind: 'Status', status: 'Failure', code: 400, reason: 'BadRequest' });
  });
});

describe('bodyFraming and BodyFramer', () => {
  const headWith = (lines: string): RequestHead => complete(`POST /api/v1/namespaces/default/pods HTTP/1.1\r\n${lines}\r\n`).head;

  it.each([
    ['', { kind: 'none' }],
    ['Content-Length: 0\r\n', { kind: 'none' }],
    ['Content-Length: 12\r\n', { kind: 'length', bytes: 12 }],
    ['Content-Length: 12\r\nContent-Length: 12\r\n', { kind: 'length', bytes: 12 }],
    ['Transfer-Encoding: chunked\r\n', { kind: 'chunked' }],
  ])('%j → %j', (lines, want) => {
    expect(bodyFraming(headWith(lines))).toEqual(want);
  });

  it.each([
    ['differing lengths', 'Content-Length: 1\r\nContent-Length: 2\r\n'],
    ['negative', 'Content-Length: -1\r\n'],
    ['not a number', 'Content-Length: 1e3\r\n'],
    ['TE and CL', 'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n'],
    ['gzip, chunked', 'Transfer-Encoding: gzip, chunked\r\n'],
    ['identity', 'Transfer-Encoding: identity\r\n'],
  ])('refuses %s (request smuggling) with a 400 Status', (_name, lines) => {
    expect(bodyFraming(headWith(lines))).toMatchObject({ kind: 'invalid', status: { code: 400 } });
  });

  it('a Content-Length body: exactly that many bytes, the rest is surplus', () => {
    const f = new BodyFramer({ kind: 'length', bytes: 5 });
    expect(f.take(Buffer.from('abc')).toString()).toBe('abc');
    expect(f.done).toBe(false);
    expect(f.take(Buffer.from('deGET /second')).toString()).toBe('de');
    expect(f.done).toBe(true);
    expect(f.take(Buffer.from('more')).length).toBe(0);
  });

  const CHUNKED = '5;ext=1\r\nhello\r\nB\r\n, world!!!!\r\n0\r\nTrailer: x\r\n\r\n';

  it('a chunked body ends after its last chunk and trailers, at every split point', () => {
    const bytes = Buffer.from(CHUNKED + 'GET /second HTTP/1.1\r\n\r\n', 'latin1');
    for (let i = 0; i <= bytes.length; i++) {
      const f = new BodyFramer({ kind: 'chunked' });
      const a = f.take(bytes.subarray(0, i));
      const b = f.take(bytes.subarray(i));
      expect(f.error, `split at ${i}`).toBeUndefined();
      expect(f.done, `split at ${i}`).toBe(true);
      expect(Buffer.concat([a, b]).toString('latin1'), `split at ${i}`).toBe(CHUNKED);
    }
  });

  it.each([
    ['no size', '\r\n'],
    ['bad size', 'zz\r\n'],
    ['data longer than its size', '2\r\nabc\r\n'],
    ['CR without LF', '2\rab'],
    ['a size beyond 12 hex digits', 'fffffffffffff\r\n'],
  ])('a malformed chunked body (%s) sets error and takes nothing more', (_name, text) => {
    const f = new BodyFramer({ kind: 'chunked' });
    f.take(Buffer.from(text, 'latin1'));
    expect(f.error).toMatch(/malformed chunked body/);
    expect(f.take(Buffer.from('0\r\n\r\n')).length).toBe(0);
  });
});

describe('apiPathRefusal', () => {
  it.each([
    '/api',
    '/api/v1/namespaces/default/pods/alpha/exec?command=ls',
    '/apis',
    '/apis/apps/v1/deployments',
    '/version',
    '/version/',
    '/openapi/v2',
    '/openapi/v3/apis/apps/v1?hash=abc',
    '/healthz',
    '/healthz/etcd',
    '/livez?verbose',
    '/readyz/ping',
  ])('serves %s', (path) => {
    expect(apiPathRefusal(path, 'one')).toBeUndefined();
  });

  it.each(['/metrics', '/logs/', '/logs/kube-apiserver.log', '/debug/pprof/', '/', '/openapi', '/apisx', '/api-extra', '/versions', '/ui'])(
    'refuses %s with 403 naming the cluster',
    (path) => {
      const s = apiPathRefusal(path, 'one');
      expect(s).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
      expect(s!.message).toContain('cluster "one"');
      expect(s!.message).toContain(JSON.stringify(path));
    },
  );

  it.each(['/api/../metrics', '/api/./v1', '/api/v1/..', '/api%2f..%2fmetrics', '/api/%2E%2E/logs', '/api//v1', '/api\\..\\metrics'])(
    'refuses the non-normalised path %s with 400',
    (path) => {
      expect(apiPathRefusal(path, 'one')).toMatchObject({ code: 400, reason: 'BadRequest' });
    },
  );
});

describe('rewriteRequestHead', () => {
  const { head } = complete(EXEC_HEAD);
  const lines = (b: Buffer): string[] => b.toString('latin1').split('\r\n');

  it('passthrough: the apiserver Host, Connection: Upgrade, every caller line kept, nothing added', () => {
    const out = lines(rewriteRequestHead(head, { host: '10.0.0.1:6443', target: head.target, accessAs: 'passthrough', credentials: { Authorization: 'Bearer agent' } }));
    expect(out[0]).toBe(`POST ${head.target} HTTP/1.1`);
    expect(out).toContain('Host: 10.0.0.1:6443');
    expect(out).not.toContain('Host: proxy.example');
    expect(out).toContain('Authorization: Bearer caller-token');
    expect(out).not.toContain('Authorization: Bearer agent');
    expect(out).toContain('Impersonate-User: alice');
    expect(out.filter((l) => /^connection:/i.test(l))).toEqual(['Connection: Upgrade']);
    expect(out.slice(-2)).toEqual(['', '']);
  });

  it('impersonate: every caller Authorization replaced by the agent\'s, Impersonate-* kept', () => {
    const twice = complete(EXEC_HEAD.replace('Connection:', 'authorization: Basic eDp5\r\nConnection:')).head;
    const out = lines(rewriteRequestHead(twice, { host: 'h', target: `/prefix${head.target}`, accessAs: 'impersonate', credentials: { Authorization: 'Bearer agent-sa-token' } }));
    expect(out[0]).toBe(`POST /prefix${head.target} HTTP/1.1`);
    expect(out.filter((l) => /^authorization:/i.test(l))).toEqual(['Authorization: Bearer agent-sa-token']);
    expect(out).toContain('Impersonate-User: alice');
    expect(out).toContain('Impersonate-Group: devs');
  });

  it('a plain request gets Connection: close whatever the proxy sent', () => {
    const plain = complete('GET /api HTTP/1.1\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n\r\n').head;
    const out = lines(rewriteRequestHead(plain, { host: 'h', target: '/api', accessAs: 'passthrough', credentials: {} }));
    expect(out.filter((l) => /^(connection|keep-alive|proxy-connection):/i.test(l))).toEqual(['Connection: close']);
    expect(isUpgradeRequest(plain)).toBe(false);
  });
});

describe('fuzz', () => {
  /** A deterministic PRNG (mulberry32), so a failure reproduces. */
  function prng(seed: number): () => number {
    let a = seed;
    return () => {
      a = (a + 0x6d2b79f5) | 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const ALPHABET = ['GET', 'POST', ' ', '/', 'api', 'HTTP/1.1', '\r\n', '\n', '\r', ':', 'Connection', 'Upgrade', 'Content-Length', 'Transfer-Encoding', 'chunked', '0', '9', 'f', ';', '..', '%2e', '\u0000', '\u00ff', '\t', ','];

  it('5000 random heads: parse, frame, police and rewrite never throw, and always answer', () => {
    const random = prng(14);
    for (let n = 0; n < 5000; n++) {
      let text = n % 3 === 0 ? 'POST /api/v1/x HTTP/1.1\r\n' : '';
      const parts = Math.floor(random() * 40);
      for (let i = 0; i < parts; i++) text += ALPHABET[Math.floor(random() * ALPHABET.length)];
      if (n % 2 === 0) text += '\r\n\r\n';
      const bytes = Buffer.from(text, 'latin1');
      const r = parseRequestHead(bytes, 256);
      expect(['incomplete', 'complete', 'invalid']).toContain(r.kind);
      if (r.kind === 'invalid') expect(r.status.code).toBe(400);
      if (r.kind !== 'complete') continue;
      expect(r.length).toBeLessThanOrEqual(bytes.length);
      const framing = bodyFraming(r.head);
      apiPathRefusal(r.head.target, 'one');
      const out = rewriteRequestHead(r.head, { host: 'h', target: r.head.target, accessAs: n % 2 ? 'impersonate' : 'passthrough', credentials: { Authorization: 'Bearer t' } });
      // What the agent writes is itself a valid head.
      expect(parseRequestHead(out, out.length + 1).kind).toBe('complete');
      if (framing.kind !== 'invalid') {
        const f = new BodyFramer(framing);
        const body = Buffer.from(ALPHABET.slice(0, Math.floor(random() * ALPHABET.length)).join(''), 'latin1');
        const taken = f.take(body);
        expect(taken.length).toBeLessThanOrEqual(body.length);
      }
    }
  });

  it('3000 random chunked bodies: the framer never throws and never takes more than it is given', () => {
    const random = prng(7);
    for (let n = 0; n < 3000; n++) {
      const f = new BodyFramer({ kind: 'chunked' });
      let total = 0;
      for (let c = 0; c < 5; c++) {
        let text = '';
        const parts = Math.floor(random() * 12);
        for (let i = 0; i < parts; i++) text += ALPHABET[Math.floor(random() * ALPHABET.length)];
        const chunk = Buffer.from(text, 'latin1');
        const taken = f.take(chunk);
        expect(taken.length).toBeLessThanOrEqual(chunk.length);
        total += taken.length;
      }
      expect(total).toBeGreaterThanOrEqual(0);
    }
  });
});
