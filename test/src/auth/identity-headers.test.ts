import { describe, expect, it } from 'vitest';
import { forbiddenStatus } from '../../../src/auth/authorizer.js';
import { ImpersonationHeaderError, impersonationHeaders, parseImpersonation, stripIdentityHeaders } from '../../../src/auth/identity-headers.js';
import { impersonatedUser, impersonationChecks } from '../../../src/auth/impersonation.js';
import { userFromRequestHeaders } from '../../../src/auth/request-header.js';
import { checkIdentity, InvalidIdentityError, type UserInfo } from '../../../src/auth/user-info.js';
import { bearerToken, TokenReviewer } from '../../../src/auth/token-review.js';
import { subjectValues } from '../../../src/auth/client-certificate.js';

describe('parseImpersonation', () => {
  it('reads user, uid, every group line and percent-decoded, lower-cased extra keys', () => {
    const r = parseImpersonation([
      'Impersonate-User', 'alice',
      'Impersonate-Group', 'devs',
      'impersonate-group', 'ops',
      'Impersonate-Uid', '42',
      'Impersonate-Extra-Scopes', 'view',
      'Impersonate-Extra-Scopes', 'edit',
      'Impersonate-Extra-example.com%2fteam', 'a',
      'Authorization', 'Bearer x',
    ]);
    expect(r).toEqual({ user: 'alice', uid: '42', groups: ['devs', 'ops'], extra: { scopes: ['view', 'edit'], 'example.com/team': ['a'] } });
  });

  it('is undefined without Impersonate-* lines and a 400 error for groups without a user', () => {
    expect(parseImpersonation(['Authorization', 'Bearer x'])).toBeUndefined();
    expect(() => parseImpersonation(['Impersonate-Group', 'system:masters'])).toThrow(ImpersonationHeaderError);
    expect(() => parseImpersonation(['Impersonate-Group', 'system:masters'])).toThrow('requested [group "system:masters"] without impersonating a user');
    expect(() => parseImpersonation(['Impersonate-User', '', 'Impersonate-Uid', '1'])).toThrow(ImpersonationHeaderError);
  });
});

describe('impersonation checks and result', () => {
  it('asks impersonate on users, uids, each group and each extra value; service accounts by namespace', () => {
    expect(impersonationChecks({ user: 'system:admin', uid: '7', groups: ['g'], extra: { scopes: ['s1', 's2'] } })).toEqual([
      { verb: 'impersonate', resource: 'users', name: 'system:admin' },
      { verb: 'impersonate', resource: 'uids', group: 'authentication.k8s.io', name: '7' },
      { verb: 'impersonate', resource: 'groups', name: 'g' },
      { verb: 'impersonate', resource: 'userextras', subresource: 'scopes', group: 'authentication.k8s.io', name: 's1' },
      { verb: 'impersonate', resource: 'userextras', subresource: 'scopes', group: 'authentication.k8s.io', name: 's2' },
    ]);
    expect(impersonationChecks({ user: 'system:serviceaccount:kube-system:default', groups: [], extra: {} })).toEqual([
      { verb: 'impersonate', resource: 'serviceaccounts', namespace: 'kube-system', name: 'default' },
    ]);
  });

  it('completes groups as kube-apiserver: system:authenticated, and service-account groups when none asked', () => {
    expect(impersonatedUser({ user: 'bob', groups: ['devs'], extra: {} }).groups).toEqual(['devs', 'system:authenticated']);
    expect(impersonatedUser({ user: 'system:serviceaccount:ns:sa', groups: [], extra: {} }).groups).toEqual([
      'system:serviceaccounts',
      'system:serviceaccounts:ns',
      'system:authenticated',
    ]);
    expect(impersonatedUser({ user: 'system:anonymous', groups: [], extra: {} }).groups).toEqual([]);
  });
});

describe('impersonationHeaders', () => {
  it('one line per group (system:authenticated too), uid, escaped extra keys', () => {
    expect(impersonationHeaders({ username: 'alice', uid: 'u1', groups: ['devs', 'system:authenticated', 'ops'], extra: { 'example.com/team a': ['x', 'y'] } })).toEqual({
      'Impersonate-User': 'alice',
      'Impersonate-Uid': 'u1',
      'Impersonate-Group': ['devs', 'system:authenticated', 'ops'],
      'Impersonate-Extra-example.com%2Fteam%20a': ['x', 'y'],
    });
  });

  it('sends system:authenticated for a JWT user shaped like a service account, so no service-account group is added upstream (finding 9)', () => {
    expect(impersonationHeaders({ username: 'system:serviceaccount:kube-system:admin', groups: ['system:authenticated'], extra: {} })).toEqual({
      'Impersonate-User': 'system:serviceaccount:kube-system:admin',
      'Impersonate-Group': ['system:authenticated'],
    });
  });

  it('writes every value as its UTF-8 bytes (a byte string), extra keys percent-encoded from their UTF-8', () => {
    const h = impersonationHeaders({ username: 'José', uid: 'ü', groups: ['šdmin'], extra: { 'example.com/é': ['č'] } });
    const bytes = (v: string | string[]): string[] => [v].flat().map((x) => Buffer.from(x, 'latin1').toString('hex'));
    expect(bytes(h['Impersonate-User']!)).toEqual([Buffer.from('José').toString('hex')]);
    expect(bytes(h['Impersonate-Uid']!)).toEqual([Buffer.from('ü').toString('hex')]);
    expect(bytes(h['Impersonate-Group']!)).toEqual([Buffer.from('šdmin').toString('hex')]);
    expect(h['Impersonate-Extra-example.com%2F%C3%A9']).toEqual([Buffer.from('č').toString('latin1')]);
  });
});

describe('checkIdentity', () => {
  it.each([
    ['a C0 control', { username: 'a\u0007' }],
    ['DEL', { username: 'a\u007f' }],
    ['a C1 control (CSI)', { username: 'a\u009b31m' }],
    ['a lone surrogate', { username: '\ud800' }],
    ['a leading space', { username: ' admin' }],
    ['a trailing space', { username: 'admin ' }],
    ['a control in the uid', { username: 'a', uid: 'u\n' }],
    ['a control in a group', { username: 'a', groups: ['ok', 'x\r\ny'] }],
    ['a control in an extra key', { username: 'a', extra: { 'k\u0000': ['v'] } }],
    ['a control in an extra value', { username: 'a', extra: { k: ['v\u0085'] } }],
  ])('refuses %s', (_, u) => {
    expect(() => checkIdentity({ groups: [], extra: {}, ...u } as UserInfo)).toThrow(InvalidIdentityError);
  });

  it('accepts any other Unicode', () => {
    expect(() => checkIdentity({ username: 'José šdmin 👩‍💻 a b', uid: '\u00a0x', groups: ['č', ''], extra: { 'example.com/é': ['\u2028'] } })).not.toThrow();
  });
});

describe('userFromRequestHeaders reads UTF-8', () => {
  const config = { usernameHeaders: ['X-Remote-User'], groupHeaders: ['X-Remote-Group'], extraHeaderPrefixes: ['X-Remote-Extra-'] };
  it('decodes a front proxy\'s lines as UTF-8 and refuses one that is not UTF-8 (401)', () => {
    const utf8 = (s: string): string => Buffer.from(s).toString('latin1');
    expect(userFromRequestHeaders(['X-Remote-User', utf8('José'), 'X-Remote-Group', utf8('č'), 'X-Remote-Extra-a%C3%A9', utf8('ü')], config)).toEqual({ username: 'José', groups: ['č'], extra: { 'aé': ['ü'] } });
    expect(() => userFromRequestHeaders(['X-Remote-User', 'Jos\xe9'], config)).toThrow(InvalidIdentityError);
    expect(() => userFromRequestHeaders(['X-Remote-User', 'a', 'X-Remote-Group', '\xff'], config)).toThrow(InvalidIdentityError);
  });
});

describe('parseImpersonation reads UTF-8', () => {
  it('decodes the bytes of each value as UTF-8 and refuses a value that is not UTF-8 (401)', () => {
    expect(parseImpersonation(['Impersonate-User', Buffer.from('José').toString('latin1')])?.user).toBe('José');
    expect(() => parseImpersonation(['Impersonate-User', 'Jos\xe9'])).toThrow(InvalidIdentityError);
  });
});

describe('stripIdentityHeaders', () => {
  const raw = ['Host', 'h', 'Authorization', 'Bearer t', 'Impersonate-User', 'root', 'X-Remote-User', 'admin', 'x-remote-extra-a', 'b', 'User-Agent', 'k'];
  const names = ['x-remote-user', 'x-remote-group'];
  const prefixes = ['x-remote-extra-'];

  it('passthrough: drops only the front-proxy lines', () => {
    const out = stripIdentityHeaders(raw, { authorization: false, impersonation: false, requestHeaderNames: names, requestHeaderPrefixes: prefixes });
    expect(out.rawHeaders).toEqual(['Host', 'h', 'Authorization', 'Bearer t', 'Impersonate-User', 'root', 'User-Agent', 'k']);
    expect(out.removed.sort()).toEqual(['x-remote-extra-a', 'x-remote-user']);
  });

  it('impersonate: also drops the caller Authorization and Impersonate-* lines', () => {
    const out = stripIdentityHeaders(raw, { authorization: true, impersonation: true, requestHeaderNames: names, requestHeaderPrefixes: prefixes });
    expect(out.rawHeaders).toEqual(['Host', 'h', 'User-Agent', 'k']);
  });
});

describe('userFromRequestHeaders', () => {
  it('first non-empty username line, every group line, extra by prefix', () => {
    const user = userFromRequestHeaders(['X-Remote-User', '', 'X-Remote-User', 'carol', 'X-Remote-Group', 'a', 'X-Remote-Group', 'b', 'X-Remote-Extra-Foo%2Fbar', 'v'], {
      usernameHeaders: ['X-Remote-User'],
      groupHeaders: ['X-Remote-Group'],
      extraHeaderPrefixes: ['X-Remote-Extra-'],
    });
    expect(user).toEqual({ username: 'carol', groups: ['a', 'b'], extra: { 'foo/bar': ['v'] } });
    expect(userFromRequestHeaders(['X-Remote-Group', 'a'], { usernameHeaders: ['X-Remote-User'], groupHeaders: [], extraHeaderPrefixes: [] })).toBeUndefined();
  });
});

describe('bearerToken and the TokenReview cache', () => {
  it('parses `Bearer <token>` with any scheme case', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });

  it('reviews a token once within the TTL', async () => {
    let calls = 0;
    const reviewer = new TokenReviewer({
      reviewToken: async (t) => {
        calls++;
        return t === 'good' ? { authenticated: true, user: { username: 'u', groups: [], extra: {} } } : { authenticated: false };
      },
    });
    expect((await reviewer.review('good')).authenticated).toBe(true);
    expect((await reviewer.review('good')).authenticated).toBe(true);
    expect((await reviewer.review('bad')).authenticated).toBe(false);
    expect(calls).toBe(2);
  });
});

describe('forbiddenStatus', () => {
  it("words a denial as kube-apiserver's responsewriters.Forbidden does", () => {
    const s = forbiddenStatus('bob', { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'default', name: 'demo' });
    expect(s.code).toBe(403);
    expect(s.reason).toBe('Forbidden');
    expect(s.message).toBe('pods "demo" is forbidden: User "bob" cannot create resource "pods/exec" in API group "" in the namespace "default"');
    expect(forbiddenStatus('bob', { verb: 'impersonate', resource: 'users', name: 'system:admin' }, 'no rule').message).toBe(
      'users "system:admin" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope: no rule',
    );
    expect(forbiddenStatus('bob', { verb: 'impersonate', resource: 'uids', group: 'authentication.k8s.io', name: '7' }).message).toBe(
      'uids.authentication.k8s.io "7" is forbidden: User "bob" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope',
    );
  });
});

describe('subjectValues', () => {
  it('reads CN and every O from a Node subject string', () => {
    expect(subjectValues('O=devs\nO=ops\nCN=alice', 'O')).toEqual(['devs', 'ops']);
    expect(subjectValues('O=devs\nO=ops\nCN=alice', 'CN')).toEqual(['alice']);
  });
});
