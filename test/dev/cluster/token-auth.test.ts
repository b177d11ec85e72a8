import { describe, expect, it } from 'vitest';
import {
  bearerToken,
  parseCsv,
  parseTokenAuthFile,
  StaticTokenAuthenticator,
  TokenAuthFileError,
  unauthorizedStatus,
} from '../../../dev/cluster/token-auth.js';
import { encodeStatus } from '../../../src/status.js';

describe('parseCsv (Go encoding/csv rules)', () => {
  it.each([
    ['plain fields', 'a,b,c\n', [['a', 'b', 'c']]],
    ['quoted field with commas', 't,u,1,"g1,g2"\n', [['t', 'u', '1', 'g1,g2']]],
    ['doubled quote', '"a""b",c', [['a"b', 'c']]],
    ['CRLF and no final newline', 'a,b\r\nc,d', [['a', 'b'], ['c', 'd']]],
    ['blank lines skipped', '\n\na\n\nb\n', [['a'], ['b']]],
    ['empty fields kept', 'a,,\n,\n', [['a', '', ''], ['', '']]],
    ['quoted empty field', '"",x\n', [['', 'x']]],
    ['quoted newline', '"a\nb",c\n', [['a\nb', 'c']]],
    ['spaces kept', ' a , b \n', [[' a ', ' b ']]],
  ])('%s', (_name, text, want) => {
    expect(parseCsv(text)).toEqual(want);
  });

  it.each([
    ['bare quote', 'a"b,c\n', 'line 1: bare " in non-quoted-field'],
    ['unterminated quote', 'x\n"abc', 'line 2: extraneous or missing " in quoted-field'],
    ['text after closing quote', '"a"b,c', 'line 1: extraneous or missing " in quoted-field'],
  ])('rejects %s', (_name, text, message) => {
    expect(() => parseCsv(text)).toThrow(new TokenAuthFileError(message));
  });
});

describe('parseTokenAuthFile', () => {
  it('reads token, user, uid and groups; skips empty tokens; a later duplicate wins', () => {
    const tokens = parseTokenAuthFile(
      ['t-alice,alice,uid-a,"devs,ops"', ',nobody,x', 't-bob,bob,', 't-alice2,alice2,u2,', 't-bob,bobby,uid-b,viewers'].join('\n'),
    );
    expect([...tokens.keys()]).toEqual(['t-alice', 't-bob', 't-alice2']);
    expect(tokens.get('t-alice')).toEqual({ name: 'alice', uid: 'uid-a', groups: ['devs', 'ops'] });
    expect(tokens.get('t-bob')).toEqual({ name: 'bobby', uid: 'uid-b', groups: ['viewers'] });
    expect(tokens.get('t-alice2')).toEqual({ name: 'alice2', uid: 'u2', groups: [] });
  });

  it('refuses a record with fewer than 3 columns, in the apiserver words', () => {
    expect(() => parseTokenAuthFile('tok,user\n', '/etc/tokens.csv')).toThrow(
      "token file '/etc/tokens.csv' must have at least 3 columns (token, user name, user uid), found 2",
    );
  });
});

describe('bearerToken', () => {
  it.each([
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER abc extra', 'abc'],
    ['  Bearer abc  ', 'abc'],
    ['Bearer', undefined],
    ['Bearer  abc', undefined], // two spaces: the second word is empty, as strings.Split gives
    ['Basic YWxpY2U6cHc=', undefined],
    [undefined, undefined],
  ])('%j → %j', (header, want) => {
    expect(bearerToken(header)).toBe(want);
  });
});

describe('StaticTokenAuthenticator', () => {
  const auth = new StaticTokenAuthenticator(parseTokenAuthFile('t1,alice,u1,"devs"\nt2,root,u2,"system:authenticated,admins"\n'));
  it('adds system:authenticated once', () => {
    expect(auth.authenticateHeader('Bearer t1')).toEqual({ name: 'alice', uid: 'u1', groups: ['devs', 'system:authenticated'] });
    expect(auth.authenticateToken('t2')?.groups).toEqual(['system:authenticated', 'admins']);
  });
  it('returns undefined for unknown tokens and missing headers', () => {
    expect(auth.authenticateHeader('Bearer nope')).toBeUndefined();
    expect(auth.authenticateHeader(undefined)).toBeUndefined();
  });
  it('has the exact 401 Status body', () => {
    expect(encodeStatus(unauthorizedStatus()).toString()).toBe(
      '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}',
    );
  });
});
