import { describe, expect, it } from 'vitest';
import { impersonate, impersonationRequests, splitServiceAccountUsername } from '../../../dev/cluster/impersonation.js';
import { parsePolicy, PolicyAuthorizer } from '../../../dev/cluster/policy.js';

const proxy = { name: 'proxy', groups: ['system:authenticated'] };
const policy = new PolicyAuthorizer(
  parsePolicy({
    rules: [
      { users: ['proxy'], verbs: ['impersonate'], resources: ['users', 'groups', 'userextras/scopes', 'uids'] },
      { users: ['proxy'], verbs: ['impersonate'], resources: ['serviceaccounts'], namespaces: ['ci'], names: ['builder'] },
      { users: ['limited'], verbs: ['impersonate'], resources: ['users'], names: ['alice'] },
    ],
  }),
);

describe('impersonationRequests', () => {
  it('collects user, groups, extras (key lower-cased, percent-decoded) and uid in the apiserver order', () => {
    const r = impersonationRequests({
      'impersonate-user': ['alice'],
      'impersonate-group': ['devs', 'ops'],
      'impersonate-extra-scopes': ['view', 'edit'],
      'impersonate-extra-example.com%2fteam': ['x'],
      'impersonate-uid': ['u-1'],
    });
    expect(r).toEqual({
      ok: true,
      value: [
        { kind: 'User', name: 'alice' },
        { kind: 'Group', name: 'devs' },
        { kind: 'Group', name: 'ops' },
        { kind: 'UserExtra', key: 'example.com/team', value: 'x' },
        { kind: 'UserExtra', key: 'scopes', value: 'view' },
        { kind: 'UserExtra', key: 'scopes', value: 'edit' },
        { kind: 'UID', uid: 'u-1' },
      ],
    });
  });
  it.each([
    [{ 'impersonate-group': ['devs'] }, 'requested [Group devs] without impersonating a user'],
    [{ 'impersonate-extra-scopes': ['a'] }, 'requested [UserExtra scopes=a] without impersonating a user'],
    [{ 'impersonate-uid': ['1'] }, 'requested [UID 1] without impersonating a user'],
  ])('refuses %j', (headers, message) => {
    expect(impersonationRequests(headers)).toEqual({ ok: false, message });
  });
  it('recognises service-account user names', () => {
    expect(splitServiceAccountUsername('system:serviceaccount:ci:builder')).toEqual({ namespace: 'ci', name: 'builder' });
    expect(splitServiceAccountUsername('system:serviceaccount:ci')).toBeUndefined();
    expect(splitServiceAccountUsername('system:serviceaccount:CI:b')).toBeUndefined();
    expect(splitServiceAccountUsername('system:serviceaccount:ci:b:c')).toBeUndefined();
  });
});

describe('impersonate', () => {
  it('keeps the requester without impersonation headers', () => {
    expect(impersonate({ 'user-agent': ['x'] }, proxy, policy)).toEqual({ ok: true, user: proxy, impersonated: false });
  });
  it('builds the impersonated user with system:authenticated added', () => {
    const out = impersonate(
      { 'impersonate-user': ['alice'], 'impersonate-group': ['devs'], 'impersonate-extra-scopes': ['view'], 'impersonate-uid': ['u-1'] },
      proxy,
      policy,
    );
    expect(out).toEqual({
      ok: true,
      impersonated: true,
      user: { name: 'alice', uid: 'u-1', groups: ['devs', 'system:authenticated'], extra: { scopes: ['view'] } },
    });
  });
  it('gives a service account its groups when none are requested', () => {
    const out = impersonate({ 'impersonate-user': ['system:serviceaccount:ci:builder'] }, proxy, policy);
    expect(out).toMatchObject({
      ok: true,
      user: { name: 'system:serviceaccount:ci:builder', groups: ['system:serviceaccounts', 'system:serviceaccounts:ci', 'system:authenticated'] },
    });
  });
  it('adds system:unauthenticated for system:anonymous', () => {
    expect(impersonate({ 'impersonate-user': ['system:anonymous'] }, proxy, policy)).toMatchObject({
      ok: true,
      user: { name: 'system:anonymous', groups: ['system:unauthenticated'] },
    });
  });
  it.each([
    [{ 'impersonate-user': ['bob'] }, 'users "bob" is forbidden: User "limited" cannot impersonate resource "users" in API group "" at the cluster scope'],
    [{ 'impersonate-user': ['alice'], 'impersonate-group': ['devs'] }, 'groups "devs" is forbidden: User "limited" cannot impersonate resource "groups" in API group "" at the cluster scope'],
    [
      { 'impersonate-user': ['alice'], 'impersonate-extra-scopes': ['view'] },
      'userextras.authentication.k8s.io "view" is forbidden: User "limited" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope',
    ],
    [{ 'impersonate-user': ['alice'], 'impersonate-uid': ['u'] }, 'uids.authentication.k8s.io "u" is forbidden: User "limited" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope'],
    [
      { 'impersonate-user': ['system:serviceaccount:ci:other'] },
      'serviceaccounts "other" is forbidden: User "limited" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ci"',
    ],
  ])('refuses %j with 403', (headers, message) => {
    const out = impersonate(headers, { name: 'limited', groups: ['system:authenticated'] }, policy);
    expect(out.ok).toBe(false);
    if (!out.ok) expect(out.status).toMatchObject({ code: 403, reason: 'Forbidden', message });
  });
  it('refuses groups without a user with 400', () => {
    const out = impersonate({ 'impersonate-group': ['devs'] }, proxy, policy);
    expect(out).toMatchObject({ ok: false, status: { code: 400, reason: 'BadRequest', message: 'requested [Group devs] without impersonating a user' } });
  });
});
