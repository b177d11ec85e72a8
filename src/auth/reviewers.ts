/**
 * Who authenticates and authorizes a caller in `--authn impersonate`: an {@link Authenticator}
 * (TokenReview, with the proxy-wide client-certificate and front-proxy trust) and an
 * {@link Authorizer} (SubjectAccessReview) over one cluster's review API — the proxy's own, or a
 * cluster behind an agent (`Route.reviews`). One pair per review API, so each cluster keeps its own
 * TokenReview cache (a token valid in one cluster says nothing about another); the JWT authenticators
 * are the proxy's own and shared by all of them.
 */
import type { X509Certificate } from 'node:crypto';
import type { ReviewApi } from '../api-client.js';
import type { AnonymousAuthConfig } from './authentication-config.js';
import { Authenticator } from './authenticator.js';
import { Authorizer } from './authorizer.js';
import type { JwtAuthenticatorSource } from './jwt-authentication.js';
import type { RequestHeaderConfig } from './request-header.js';
import { TokenReviewer } from './token-review.js';

/** An authenticator and authorizer over one cluster's reviews. */
export interface Reviewers {
  authenticator: Authenticator;
  authorizer: Authorizer;
}

/** The proxy-wide trust every cluster's authenticator shares. */
export interface ReviewerTrust {
  /** `--client-ca-file`, parsed. */
  clientCa?: X509Certificate[];
  /** `--requestheader-*`. */
  requestHeader?: RequestHeaderConfig;
  /**
   * The JWT authenticators (`--authentication-config`, `--oidc-*`): proxy-wide, so one identity
   * reaches every cluster; each cluster still authorizes it with its own SubjectAccessReview.
   */
  jwt?: Pick<JwtAuthenticatorSource, 'authenticator'>;
  /** `AuthenticationConfiguration.anonymous` (fixed for the process). */
  anonymous?: AnonymousAuthConfig;
}

/** A function giving the {@link Reviewers} of a review API, the same pair every time for the same API. */
export function reviewersPerCluster(trust: ReviewerTrust): (reviews: ReviewApi) => Reviewers {
  const cache = new WeakMap<ReviewApi, Reviewers>();
  return (reviews) => {
    let r = cache.get(reviews);
    if (!r) {
      r = {
        authenticator: new Authenticator({
          tokens: new TokenReviewer(reviews),
          ...(trust.clientCa ? { clientCa: trust.clientCa } : {}),
          ...(trust.requestHeader ? { requestHeader: trust.requestHeader } : {}),
          ...(trust.jwt ? { jwt: trust.jwt } : {}),
          ...(trust.anonymous ? { anonymous: trust.anonymous } : {}),
        }),
        authorizer: new Authorizer(reviews),
      };
      cache.set(reviews, r);
    }
    return r;
  };
}
