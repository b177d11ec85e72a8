/**
 * `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` and `…/selfsubjectrulesreviews`,
 * answered as kube-apiserver's REST storage does (`pkg/registry/authorization/selfsubjectaccessreview`,
 * `…/selfsubjectrulesreview`): 201 with the review echoed and `status` filled in for the requesting
 * user. This is what `kubectl auth can-i` (and `--list`) sends.
 */
import { errorStatus } from '../../src/status.js';
import type { Authorizer } from './policy.js';
import { subjectAccessReviewAttributes, type ReviewAnswer } from './reviews.js';
import type { UserInfo } from './token-auth.js';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Who asks when the dev cluster has no authentication (kube-apiserver's anonymous user). */
export const ANONYMOUS: UserInfo = { name: 'system:anonymous', groups: ['system:unauthenticated'] };

function checkKind(body: unknown, kind: string): { ok: true; review: Json } | { ok: false; answer: ReviewAnswer } {
  const refuse = (why: string): { ok: false; answer: ReviewAnswer } => ({ ok: false, answer: { code: 400, body: errorStatus(400, `not a ${kind}: ${why}`) } });
  if (!isObject(body)) return refuse('the body is not a JSON object');
  if (body.kind !== undefined && body.kind !== kind) return refuse(`kind ${JSON.stringify(body.kind)}`);
  if (body.apiVersion !== undefined && body.apiVersion !== 'authorization.k8s.io/v1') return refuse(`apiVersion ${JSON.stringify(body.apiVersion)}`);
  return { ok: true, review: body };
}

/** A SelfSubjectAccessReview: may `user` do what `spec` describes? */
export function selfSubjectAccessReview(body: unknown, user: UserInfo, authorizer: Authorizer): ReviewAnswer {
  const checked = checkKind(body, 'SelfSubjectAccessReview');
  if (!checked.ok) return checked.answer;
  const spec = isObject(checked.review.spec) ? checked.review.spec : {};
  const hasResource = isObject(spec.resourceAttributes);
  const hasNonResource = isObject(spec.nonResourceAttributes);
  if (hasResource === hasNonResource) {
    const field = hasResource ? 'spec.nonResourceAttributes' : 'spec.resourceAttributes';
    const message = hasResource
      ? 'cannot be specified in combination with resourceAttributes'
      : 'exactly one of nonResourceAttributes or resourceAttributes must be specified';
    const value = hasResource ? JSON.stringify(spec.nonResourceAttributes) : '"null"';
    return {
      code: 422,
      body: errorStatus(422, `SelfSubjectAccessReview.authorization.k8s.io "" is invalid: ${field}: Invalid value: ${value}: ${message}`, 'Invalid', {
        group: 'authorization.k8s.io',
        kind: 'SelfSubjectAccessReview',
        causes: [{ reason: 'FieldValueInvalid', message: `Invalid value: ${value}: ${message}`, field }],
      }),
    };
  }
  const attrs = subjectAccessReviewAttributes({ ...spec, user: user.name, groups: user.groups, ...(user.uid ? { uid: user.uid } : {}) });
  const decision = authorizer.authorize(attrs);
  const status: Json = { allowed: decision.allowed };
  if (decision.reason !== '') status.reason = decision.reason;
  return {
    code: 201,
    body: { kind: 'SelfSubjectAccessReview', apiVersion: 'authorization.k8s.io/v1', metadata: { creationTimestamp: null }, spec, status },
  };
}

/** A SelfSubjectRulesReview: everything `user` may do in `spec.namespace`. */
export function selfSubjectRulesReview(body: unknown, user: UserInfo, authorizer: Authorizer): ReviewAnswer {
  const checked = checkKind(body, 'SelfSubjectRulesReview');
  if (!checked.ok) return checked.answer;
  const spec = isObject(checked.review.spec) ? checked.review.spec : {};
  const namespace = typeof spec.namespace === 'string' ? spec.namespace : '';
  if (namespace === '') {
    return { code: 400, body: errorStatus(400, 'no namespace on request') };
  }
  const rules = authorizer.rulesFor(user, namespace);
  return {
    code: 201,
    body: {
      kind: 'SelfSubjectRulesReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec,
      status: { resourceRules: rules.resourceRules, nonResourceRules: rules.nonResourceRules, incomplete: rules.incomplete },
    },
  };
}
