import { describe, expect, it } from 'vitest';
import { parsePolicy, PolicyAuthorizer } from '../../../dev/cluster/policy.js';
import { subjectAccessReview, tokenReview } from '../../../dev/cluster/reviews.js';
import { parseTokenAuthFile, StaticTokenAuthenticator } from '../../../dev/cluster/token-auth.js';

const authn = new StaticTokenAuthenticator(parseTokenAuthFile('t-alice,alice,uid-a,"devs"\n'));
const authz = new PolicyAuthorizer(
  parsePolicy({ rules: [{ groups: ['devs'], verbs: ['create'], resources: ['pods/exec'], namespaces: ['default'] }, { users: ['m'], verbs: ['get'], nonResourceURLs: ['/metrics'] }] }),
);

describe('TokenReview', () => {
  it('authenticates a known token', () => {
    expect(tokenReview({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 't-alice' } }, authn)).toEqual({
      code: 201,
      body: {
        kind: 'TokenReview',
        apiVersion: 'authentication.k8s.io/v1',
        metadata: { creationTimestamp: null },
        spec: { token: 't-alice' },
        status: {
          authenticated: true,
          user: { username: 'alice', uid: 'uid-a', groups: ['devs', 'system:authenticated'] },
          audiences: ['https://kubernetes.default.svc.cluster.local'],
        },
      },
    });
  });
  it('echoes requested audiences and answers an unknown token with an empty user', () => {
    expect(tokenReview({ spec: { token: 't-alice', audiences: ['proxy'] } }, authn).body).toMatchObject({ status: { audiences: ['proxy'] } });
    expect(tokenReview({ spec: { token: 'nope' } }, authn).body).toMatchObject({ status: { user: {} } });
    expect((tokenReview({ spec: { token: 'nope' } }, authn).body as { status: object }).status).toEqual({ user: {} });
  });
  it('refuses an empty token and a foreign kind with 400', () => {
    expect(tokenReview({ spec: {} }, authn)).toMatchObject({ code: 400, body: { message: 'token is required for TokenReview in authentication' } });
    expect(tokenReview({ kind: 'Pod', spec: { token: 'x' } }, authn)).toMatchObject({ code: 400, body: { reason: 'BadRequest' } });
  });
});

describe('SubjectAccessReview', () => {
  const sar = (spec: object) => subjectAccessReview({ apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec }, authz);
  it('allows by group with the reason, and echoes the spec', () => {
    const spec = { user: 'x', groups: ['devs'], resourceAttributes: { namespace: 'default', verb: 'create', resource: 'pods', subresource: 'exec', name: 'demo' } };
    expect(sar(spec)).toEqual({
      code: 201,
      body: {
        kind: 'SubjectAccessReview',
        apiVersion: 'authorization.k8s.io/v1',
        metadata: { creationTimestamp: null },
        spec,
        status: { allowed: true, reason: 'allowed by dev-cluster policy rule 0' },
      },
    });
  });
  it('answers no opinion as allowed false without reason or denied', () => {
    const r = sar({ user: 'alice', resourceAttributes: { namespace: 'default', verb: 'get', resource: 'pods', subresource: 'exec' } });
    expect((r.body as { status: object }).status).toEqual({ allowed: false });
  });
  it('evaluates non-resource attributes', () => {
    expect((sar({ user: 'm', nonResourceAttributes: { path: '/metrics', verb: 'get' } }).body as { status: object }).status).toMatchObject({ allowed: true });
    expect((sar({ user: 'x', groups: ['system:authenticated'], nonResourceAttributes: { path: '/version', verb: 'get' } }).body as { status: object }).status).toMatchObject({ allowed: true });
  });
  it('refuses an invalid spec with 422', () => {
    const r = sar({ resourceAttributes: { verb: 'get' } });
    expect(r.code).toBe(422);
    expect(r.body).toMatchObject({
      reason: 'Invalid',
      message: 'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified',
    });
    const both = sar({ user: 'x' });
    expect((both.body as { message: string }).message).toContain('exactly one of nonResourceAttributes or resourceAttributes must be specified');
  });
});
