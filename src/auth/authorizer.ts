/**
 * Authorization by SubjectAccessReview, and the Forbidden Status kube-apiserver answers with
 * (`responsewriters.Forbidden`: `<resource> "<name>" is forbidden: User "<u>" cannot <verb> resource
 * "<resource/subresource>" in API group "<g>" in the namespace "<ns>"[: <reason>]`).
 */
import type { AccessAttributes, ProxyApiClient } from '../api-client.js';
import { errorStatus, type V1Status } from '../status.js';
import type { UserInfo } from './user-info.js';

/** apiserver's `forbiddenMessage`: the sentence after `is forbidden: `. */
export function forbiddenMessage(username: string, a: AccessAttributes): string {
  if (a.path !== undefined) return `User ${JSON.stringify(username)} cannot ${a.verb} path ${JSON.stringify(a.path)}`;
  const resource = a.subresource ? `${a.resource ?? ''}/${a.subresource}` : (a.resource ?? '');
  const where = a.namespace ? `in the namespace ${JSON.stringify(a.namespace)}` : 'at the cluster scope';
  return `User ${JSON.stringify(username)} cannot ${a.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(a.group ?? '')} ${where}`;
}

/** The 403 Status for a denied request, as kube-apiserver builds it (`NewForbidden`). */
export function forbiddenStatus(username: string, a: AccessAttributes, reason = ''): V1Status {
  const detail = reason === '' ? forbiddenMessage(username, a) : `${forbiddenMessage(username, a)}: ${reason}`;
  const resource = a.path !== undefined ? '' : a.group ? `${a.resource ?? ''}.${a.group}` : (a.resource ?? '');
  let message: string;
  if (resource === '') message = `forbidden: ${detail}`;
  else if (!a.name) message = `${resource} is forbidden: ${detail}`;
  else message = `${resource} ${JSON.stringify(a.name)} is forbidden: ${detail}`;
  const details: NonNullable<V1Status['details']> = {};
  if (a.name) details.name = a.name;
  if (a.group) details.group = a.group;
  if (a.resource) details.kind = a.resource;
  return errorStatus(403, message, 'Forbidden', details);
}

/** A request the authorizer refused; `status` is the answer. */
export class ForbiddenError extends Error {
  override readonly name = 'ForbiddenError';
  constructor(readonly status: V1Status) {
    super(status.message);
  }
}

/** The authorizer failed to decide (SubjectAccessReview error): refused with 500, never allowed. */
export class AuthorizationError extends Error {
  override readonly name = 'AuthorizationError';
}

/** SubjectAccessReview-backed authorization. No cache: every streaming request is asked afresh. */
export class Authorizer {
  readonly #api: Pick<ProxyApiClient, 'reviewAccess'>;

  constructor(api: Pick<ProxyApiClient, 'reviewAccess'>) {
    this.#api = api;
  }

  /** Resolve when allowed; throw {@link ForbiddenError} when denied, {@link AuthorizationError} on failure. */
  async authorize(user: UserInfo, attributes: AccessAttributes): Promise<void> {
    let decision;
    try {
      decision = await this.#api.reviewAccess(user, attributes);
    } catch (e) {
      throw new AuthorizationError(`authorization failed: ${(e as Error).message}`, { cause: e });
    }
    if (decision.allowed) return;
    if (decision.evaluationError && decision.reason === '') throw new AuthorizationError(`authorization failed: ${decision.evaluationError}`);
    throw new ForbiddenError(forbiddenStatus(user.username, attributes, decision.reason));
  }
}
