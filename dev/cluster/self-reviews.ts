/**
 * `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` and `…/selfsubjectrulesreviews`,
 * answered as kube-apiserver's REST storage does (`pkg/registry/authorization/selfsubjectaccessreview`,
 * `…/selfsubjectrulesreview`): 201 with the review echoed and `status` filled in for the requesting
 * user. This is what `kubectl auth can-i` (and `--list`) sends. And
 * `POST /apis/authentication.k8s.io/{v1,v1beta1,v1alpha1}/selfsubjectreviews`
 * (`pkg/registry/authentication/selfsubjectreview`): 201 with `status.userInfo` of the requesting
 * user — the impersonated one when the request impersonates, as kube-apiserver answers after its
 * impersonation filter. `kubectl auth whoami` posts v1 (1.28+; protobuf in 1.33) or v1beta1
 * first (1.27), falling back to the older versions on 404.
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

/** The versions of authentication.k8s.io that serve SelfSubjectReview (v1 since 1.28, v1beta1 since 1.27, v1alpha1 since 1.26). */
export const SELF_SUBJECT_REVIEW_VERSIONS: readonly string[] = ['v1', 'v1beta1', 'v1alpha1'];

/** A SelfSubjectReview: who the requesting `user` is (`status.userInfo`). */
export function selfSubjectReview(body: unknown, user: UserInfo, version: string): ReviewAnswer {
  const apiVersion = `authentication.k8s.io/${version}`;
  const refuse = (why: string): ReviewAnswer => ({ code: 400, body: errorStatus(400, `not a SelfSubjectReview: ${why}`) });
  if (!isObject(body)) return refuse('the body is not a JSON object');
  if (body.kind !== undefined && body.kind !== 'SelfSubjectReview') return refuse(`kind ${JSON.stringify(body.kind)}`);
  if (body.apiVersion !== undefined && body.apiVersion !== apiVersion) return refuse(`apiVersion ${JSON.stringify(body.apiVersion)}`);
  const userInfo: Json = { username: user.name };
  if (user.uid) userInfo.uid = user.uid;
  if (user.groups.length > 0) userInfo.groups = user.groups;
  if (user.extra && Object.keys(user.extra).length > 0) userInfo.extra = user.extra;
  return { code: 201, body: { kind: 'SelfSubjectReview', apiVersion, metadata: { creationTimestamp: null }, status: { userInfo } } };
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
