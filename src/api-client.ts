/**
 * The proxy's own calls to the Kubernetes API, with its own credentials, through
 * @kubernetes/client-node: TokenReview and SubjectAccessReview (the `impersonate` authentication
 * mode) and reading pods and nodes (the `kubelet` upstream mode). Callers' requests never go through
 * here. client-node is imported on first use (it costs about 1.5 s of start-up on this machine class).
 * The SelfSubjectReview's shapes are here too; it is sent with the caller's own credentials along the
 * caller's route (`src/recording/caller-identity.ts`), never with the proxy's.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { UserInfo } from './auth/user-info.js';

/** `spec.resourceAttributes` / `nonResourceAttributes` of a SubjectAccessReview. */
export interface AccessAttributes {
  verb: string;
  /** Resource requests. */
  resource?: string;
  subresource?: string;
  group?: string;
  namespace?: string;
  name?: string;
  /** Non-resource requests (`/version`). */
  path?: string;
}

/** A SubjectAccessReview's answer. */
export interface AccessDecision {
  allowed: boolean;
  reason: string;
  /** The authorizer failed (not a denial); the request is refused with 500. */
  evaluationError?: string;
}

/** A TokenReview's answer. */
export type TokenReviewResult = { authenticated: true; user: UserInfo } | { authenticated: false; error?: string };

/** The slice of a Pod the kubelet mode reads. */
export interface PodInfo {
  nodeName?: string;
  containers: string[];
}

/** The slice of a Node the kubelet mode reads. */
export interface NodeInfo {
  addresses: { type: string; address: string }[];
  kubeletPort?: number;
  /**
   * `status.declaredFeatures` (NodeDeclaredFeatures, Kubernetes ≥ 1.35): what the node's kubelet
   * declares it supports, e.g. `ExtendWebSocketsToKubelet`; empty when the node lists none.
   */
  declaredFeatures?: string[];
}

/**
 * `status.declaredFeatures` of a Node's JSON: the strings of the list, nothing else. client-node 1.4's
 * model predates the field and drops it, so it is read from the answer's text.
 */
export function declaredFeaturesOf(nodeJson: string): string[] {
  try {
    const list = (JSON.parse(nodeJson) as { status?: { declaredFeatures?: unknown } } | null)?.status?.declaredFeatures;
    return Array.isArray(list) ? list.filter((f): f is string => typeof f === 'string') : [];
  } catch {
    return [];
  }
}

/** The slice of a Service that endpoint resolution reads. */
export interface ServiceInfo {
  /** `spec.type` (`ClusterIP`, `ExternalName`, …). */
  type: string;
  /** `spec.externalName` of an ExternalName Service. */
  externalName?: string;
  ports: { name: string; port: number }[];
}

/** The slice of an EndpointSlice that endpoint resolution reads. */
export interface EndpointSliceInfo {
  ports: { name: string; port: number }[];
  /** Each endpoint's addresses; `ready` as EndpointSlice conditions say (unset counts as ready). */
  endpoints: { addresses: string[]; ready: boolean }[];
}

/** What the proxy asks of the API. Implemented over client-node; tests may pass their own. */
export interface ProxyApiClient {
  reviewToken(token: string): Promise<TokenReviewResult>;
  reviewAccess(user: UserInfo, attributes: AccessAttributes): Promise<AccessDecision>;
  /** undefined when the pod does not exist. */
  readPod(namespace: string, name: string): Promise<PodInfo | undefined>;
  /** undefined when the node does not exist. */
  readNode(name: string): Promise<NodeInfo | undefined>;
  /** undefined when the Service does not exist (aggregation: an APIService's `spec.service`). */
  readService(namespace: string, name: string): Promise<ServiceInfo | undefined>;
  /** The EndpointSlices of a Service (label `kubernetes.io/service-name`). */
  listEndpointSlices(namespace: string, service: string): Promise<EndpointSliceInfo[]>;
}

/** The reviews the `impersonate` mode makes, wherever they go (the proxy's API, a cluster's tunnel). */
export type ReviewApi = Pick<ProxyApiClient, 'reviewToken' | 'reviewAccess'>;

/** A TokenReview request body for `token`. */
export function tokenReviewBody(token: string): { apiVersion: string; kind: string; spec: { token: string } } {
  return { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } };
}

/** The `status` of a TokenReview answer, as the shape the authenticator uses (extra keys lower-cased). */
export interface TokenReviewStatus {
  authenticated?: boolean;
  error?: string;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

/** A TokenReview answer's status as a {@link TokenReviewResult}. */
export function tokenReviewResult(s: TokenReviewStatus | undefined): TokenReviewResult {
  if (!s?.authenticated || !s.user?.username) return s?.error ? { authenticated: false, error: s.error } : { authenticated: false };
  const user: UserInfo = { username: s.user.username, groups: s.user.groups ?? [], extra: {} };
  if (s.user.uid) user.uid = s.user.uid;
  for (const [k, v] of Object.entries(s.user.extra ?? {})) user.extra[k.toLowerCase()] = [...v];
  return { authenticated: true, user };
}

/**
 * The versions of `authentication.k8s.io` that serve SelfSubjectReview, newest first: v1 since
 * Kubernetes 1.28, v1beta1 since 1.27, v1alpha1 since 1.26 (`kubectl auth whoami` falls back in the
 * same order on 404).
 */
export const SELF_SUBJECT_REVIEW_VERSIONS = ['v1', 'v1beta1', 'v1alpha1'] as const;

/** A SelfSubjectReview request body (it has no spec: the answer is about whoever asks). */
export function selfSubjectReviewBody(version: (typeof SELF_SUBJECT_REVIEW_VERSIONS)[number]): { apiVersion: string; kind: string } {
  return { apiVersion: `authentication.k8s.io/${version}`, kind: 'SelfSubjectReview' };
}

/** Who a SelfSubjectReview answer says the caller is, or undefined when it names no user. */
export function selfSubjectReviewUser(answer: unknown): { username: string; uid?: string; groups: string[] } | undefined {
  const info = (answer as { status?: { userInfo?: { username?: unknown; uid?: unknown; groups?: unknown } } } | null)?.status?.userInfo;
  if (typeof info?.username !== 'string' || info.username === '') return undefined;
  const groups = Array.isArray(info.groups) ? info.groups.filter((g): g is string => typeof g === 'string') : [];
  return { username: info.username, ...(typeof info.uid === 'string' && info.uid !== '' ? { uid: info.uid } : {}), groups };
}

/** A SubjectAccessReview request body: may `user` do `a`? */
export function subjectAccessReviewBody(user: UserInfo, a: AccessAttributes): { apiVersion: string; kind: string; spec: Record<string, unknown> } {
  const spec: Record<string, unknown> = { user: user.username, groups: user.groups };
  if (user.uid !== undefined) spec.uid = user.uid;
  if (Object.keys(user.extra).length > 0) spec.extra = user.extra;
  if (a.path !== undefined) spec.nonResourceAttributes = { path: a.path, verb: a.verb };
  else {
    const r: Record<string, string> = { verb: a.verb, group: a.group ?? '', resource: a.resource ?? '' };
    if (a.subresource !== undefined) r.subresource = a.subresource;
    if (a.namespace !== undefined) r.namespace = a.namespace;
    if (a.name !== undefined) r.name = a.name;
    spec.resourceAttributes = r;
  }
  return { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec };
}

/** A SubjectAccessReview answer's status as an {@link AccessDecision} (allowed only if not also denied). */
export function accessDecision(s: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string } | undefined): AccessDecision {
  const decision: AccessDecision = { allowed: s?.allowed === true && s.denied !== true, reason: s?.reason ?? '' };
  if (s?.evaluationError) decision.evaluationError = s.evaluationError;
  return decision;
}

/** HTTP status of a client-node ApiException, if it is one. */
function apiErrorCode(e: unknown): number | undefined {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

/** A {@link ProxyApiClient} over client-node with the given KubeConfig. */
export function createProxyApiClient(loadConfig: () => Promise<KubeConfig>): ProxyApiClient {
  let apis: Promise<{
    core: import('@kubernetes/client-node').CoreV1Api;
    authn: import('@kubernetes/client-node').AuthenticationV1Api;
    authz: import('@kubernetes/client-node').AuthorizationV1Api;
    discovery: import('@kubernetes/client-node').DiscoveryV1Api;
    Observable: typeof import('@kubernetes/client-node').Observable;
  }> | undefined;
  const get = (): NonNullable<typeof apis> =>
    (apis ??= (async () => {
      const k8s = await import('@kubernetes/client-node');
      const kc = await loadConfig();
      return {
        core: kc.makeApiClient(k8s.CoreV1Api),
        authn: kc.makeApiClient(k8s.AuthenticationV1Api),
        authz: kc.makeApiClient(k8s.AuthorizationV1Api),
        discovery: kc.makeApiClient(k8s.DiscoveryV1Api),
        Observable: k8s.Observable,
      };
    })());
  return {
    async reviewToken(token) {
      const { authn } = await get();
      const review = await authn.createTokenReview({ body: tokenReviewBody(token) });
      return tokenReviewResult(review.status);
    },
    async reviewAccess(user, a) {
      const { authz } = await get();
      const review = await authz.createSubjectAccessReview({ body: subjectAccessReviewBody(user, a) as import('@kubernetes/client-node').V1SubjectAccessReview });
      return accessDecision(review.status);
    },
    async readPod(namespace, name) {
      const { core } = await get();
      try {
        const pod = await core.readNamespacedPod({ namespace, name });
        const info: PodInfo = { containers: (pod.spec?.containers ?? []).map((c) => c.name) };
        if (pod.spec?.nodeName) info.nodeName = pod.spec.nodeName;
        return info;
      } catch (e) {
        if (apiErrorCode(e) === 404) return undefined;
        throw e;
      }
    },
    async readNode(name) {
      const { core, Observable } = await get();
      try {
        // The answer's text is kept (the body read once, handed on) for the fields the model drops.
        let text = '';
        const keepText = {
          pre: (c: import('@kubernetes/client-node').RequestContext) => new Observable(Promise.resolve(c)),
          post: (c: import('@kubernetes/client-node').ResponseContext) =>
            new Observable(
              c.body.text().then((body) => {
                text = body;
                c.body = { text: async () => body, binary: async () => Buffer.from(body) };
                return c;
              }),
            ),
        };
        const node = await core.readNode({ name }, { middleware: [keepText], middlewareMergeStrategy: 'append' });
        const info: NodeInfo = { addresses: (node.status?.addresses ?? []).map((a) => ({ type: a.type, address: a.address })), declaredFeatures: declaredFeaturesOf(text) };
        const port = node.status?.daemonEndpoints?.kubeletEndpoint?.Port;
        if (port) info.kubeletPort = port;
        return info;
      } catch (e) {
        if (apiErrorCode(e) === 404) return undefined;
        throw e;
      }
    },
    async readService(namespace, name) {
      const { core } = await get();
      try {
        const svc = await core.readNamespacedService({ namespace, name });
        const info: ServiceInfo = { type: svc.spec?.type ?? 'ClusterIP', ports: (svc.spec?.ports ?? []).map((p) => ({ name: p.name ?? '', port: p.port })) };
        if (svc.spec?.externalName) info.externalName = svc.spec.externalName;
        return info;
      } catch (e) {
        if (apiErrorCode(e) === 404) return undefined;
        throw e;
      }
    },
    async listEndpointSlices(namespace, service) {
      const { discovery } = await get();
      const list = await discovery.listNamespacedEndpointSlice({ namespace, labelSelector: `kubernetes.io/service-name=${service}` });
      return list.items.map((slice) => ({
        ports: (slice.ports ?? []).map((p) => ({ name: p.name ?? '', port: p.port ?? 0 })),
        endpoints: slice.endpoints.map((ep) => ({ addresses: [...ep.addresses], ready: ep.conditions?.ready !== false })),
      }));
    },
  };
}
