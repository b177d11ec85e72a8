/**
 * `POST /apis/authentication.k8s.io/v1/tokenreviews` and
 * `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, answered as kube-apiserver's REST
 * storage does (`pkg/registry/authentication/tokenreview`, `pkg/registry/authorization/subjectaccessreview`):
 * 201 with the review echoed and `status` filled in. Who may create them was decided before (verb
 * `create` on `tokenreviews` / `subjectaccessreviews`).
 */
import { errorStatus, type V1Status } from '../../src/status.js';
import type { Authorizer } from './policy.js';
import type { AuthorizerAttributes } from './request-attributes.js';
import type { StaticTokenAuthenticator } from './token-auth.js';

/** The audiences of a TokenReview without `spec.audiences` (kube-apiserver's `--api-audiences` default). */
export const DEFAULT_API_AUDIENCES: readonly string[] = ['https://kubernetes.default.svc.cluster.local'];

/** The answer of a review: HTTP code and body (the review, or a Status). */
export interface ReviewAnswer {
  code: number;
  body: Record<string, unknown> | V1Status;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const stringList = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;

/** The review object, or the 400 answer when the body is not one of `kind`. */
function checkKind(body: unknown, kind: string, apiVersion: string): { ok: true; review: Json } | { ok: false; answer: ReviewAnswer } {
  const refuse = (why: string): { ok: false; answer: ReviewAnswer } => ({ ok: false, answer: { code: 400, body: errorStatus(400, `not a ${kind}: ${why}`) } });
  if (!isObject(body)) return refuse('the body is not a JSON object');
  if (body.kind !== undefined && body.kind !== kind) return refuse(`kind ${JSON.stringify(body.kind)}`);
  if (body.apiVersion !== undefined && body.apiVersion !== apiVersion) return refuse(`apiVersion ${JSON.stringify(body.apiVersion)}`);
  return { ok: true, review: body };
}

/** A TokenReview: authenticate `spec.token` with the cluster's token file. */
export function tokenReview(body: unknown, authenticator: StaticTokenAuthenticator): ReviewAnswer {
  const checked = checkKind(body, 'TokenReview', 'authentication.k8s.io/v1');
  if (!checked.ok) return checked.answer;
  const spec = isObject(checked.review.spec) ? checked.review.spec : {};
  const token = typeof spec.token === 'string' ? spec.token : '';
  if (token === '') return { code: 400, body: errorStatus(400, 'token is required for TokenReview in authentication') };
  const audiences = stringList(spec.audiences)?.length ? stringList(spec.audiences)! : [...DEFAULT_API_AUDIENCES];
  const user = authenticator.authenticateToken(token);
  const status: Json = {};
  if (user) {
    status.authenticated = true;
    const info: Json = { username: user.name };
    if (user.uid) info.uid = user.uid;
    info.groups = user.groups;
    status.user = info;
    status.audiences = audiences;
  } else {
    status.user = {};
  }
  return {
    code: 201,
    body: {
      kind: 'TokenReview',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec,
      status,
    },
  };
}

/** `SubjectAccessReview.authorization.k8s.io "" is invalid: …` (422), as `apierrors.NewInvalid` words it. */
function invalid(causes: { field: string; value: string; message: string }[]): ReviewAnswer {
  const texts = causes.map((c) => `${c.field}: Invalid value: ${c.value}: ${c.message}`);
  const list = texts.length === 1 ? texts[0]! : `[${texts.join(', ')}]`;
  return {
    code: 422,
    body: errorStatus(422, `SubjectAccessReview.authorization.k8s.io "" is invalid: ${list}`, 'Invalid', {
      group: 'authorization.k8s.io',
      kind: 'SubjectAccessReview',
      causes: texts.map((t, i) => ({ reason: 'FieldValueInvalid', message: t.slice(causes[i]!.field.length + 2), field: causes[i]!.field })),
    }),
  };
}

/** The attributes a SubjectAccessReview spec asks about (`AuthorizationAttributesFrom`). */
export function subjectAccessReviewAttributes(spec: Json): AuthorizerAttributes {
  const groups = stringList(spec.groups) ?? [];
  const user = { name: typeof spec.user === 'string' ? spec.user : '', groups } as AuthorizerAttributes['user'];
  if (typeof spec.uid === 'string' && spec.uid !== '') user.uid = spec.uid;
  const str = (o: Json, k: string): string => (typeof o[k] === 'string' ? (o[k] as string) : '');
  if (isObject(spec.resourceAttributes)) {
    const ra = spec.resourceAttributes;
    return {
      user,
      verb: str(ra, 'verb'),
      resourceRequest: true,
      path: '',
      apiGroup: str(ra, 'group'),
      apiVersion: str(ra, 'version') || '*',
      namespace: str(ra, 'namespace'),
      resource: str(ra, 'resource'),
      subresource: str(ra, 'subresource'),
      name: str(ra, 'name'),
    };
  }
  const nra = isObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : {};
  return {
    user,
    verb: str(nra, 'verb'),
    resourceRequest: false,
    path: str(nra, 'path'),
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
}

/** A SubjectAccessReview: evaluate the spec's user, groups and attributes against `authorizer`. */
export function subjectAccessReview(body: unknown, authorizer: Authorizer): ReviewAnswer {
  const checked = checkKind(body, 'SubjectAccessReview', 'authorization.k8s.io/v1');
  if (!checked.ok) return checked.answer;
  const spec = isObject(checked.review.spec) ? checked.review.spec : {};
  const causes: { field: string; value: string; message: string }[] = [];
  const hasResource = isObject(spec.resourceAttributes);
  const hasNonResource = isObject(spec.nonResourceAttributes);
  if (hasResource && hasNonResource) {
    causes.push({ field: 'spec.nonResourceAttributes', value: JSON.stringify(spec.nonResourceAttributes), message: 'cannot be specified in combination with resourceAttributes' });
  }
  if (!hasResource && !hasNonResource) {
    causes.push({ field: 'spec.resourceAttributes', value: '"null"', message: 'exactly one of nonResourceAttributes or resourceAttributes must be specified' });
  }
  const user = typeof spec.user === 'string' ? spec.user : '';
  if (user === '' && (stringList(spec.groups) ?? []).length === 0) {
    causes.push({ field: 'spec.user', value: '""', message: 'at least one of user or group must be specified' });
  }
  if (causes.length > 0) return invalid(causes);

  const decision = authorizer.authorize(subjectAccessReviewAttributes(spec));
  const status: Json = { allowed: decision.allowed };
  if (decision.reason !== '') status.reason = decision.reason;
  return {
    code: 201,
    body: {
      kind: 'SubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec,
      status,
    },
  };
}
