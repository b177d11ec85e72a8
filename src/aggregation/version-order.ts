/**
 * Kubernetes' version order for API versions: `CompareKubeAwareVersionStrings` from
 * apimachinery `pkg/version/helpers.go`.
 *
 * Kube-like versions (`v<major>`, `v<major>alpha<minor>`, `v<major>beta<minor>`) sort GA > beta >
 * alpha, then by major, then by minor, all descending; any other string sorts after every kube-like
 * version, in ascending lexical order. So, highest first:
 * `v10, v2, v1, v11beta2, v10beta3, v3beta1, v12alpha1, v11alpha2, foo1, foo10`.
 */

const KUBE_VERSION_RE = /^v(\d+)(?:(alpha|beta)(\d+))?$/;

/** Go's `strconv.Atoi` bound: a number wider than int64 makes the version non-kube-like. */
const MAX_INT64 = 9223372036854775807n;

/** A parsed kube-like version; `type` 0 = alpha, 1 = beta, 2 = GA (bigger wins). */
interface KubeVersion {
  major: bigint;
  type: 0 | 1 | 2;
  minor: bigint;
}

function parseKubeVersion(v: string): KubeVersion | undefined {
  const m = KUBE_VERSION_RE.exec(v);
  if (!m) return undefined;
  const major = BigInt(m[1]!);
  const minor = m[3] === undefined ? 0n : BigInt(m[3]);
  if (major > MAX_INT64 || minor > MAX_INT64) return undefined;
  return { major, type: m[2] === 'alpha' ? 0 : m[2] === 'beta' ? 1 : 2, minor };
}

function sign(n: bigint | number): number {
  return n > 0 ? 1 : n < 0 ? -1 : 0;
}

/**
 * Compare two version strings the way Kubernetes does: positive when `v1` sorts before (is
 * "greater" than) `v2`, negative when after, 0 when equal. Only the sign is meaningful.
 */
export function compareKubeAwareVersionStrings(v1: string, v2: string): number {
  if (v1 === v2) return 0;
  const a = parseKubeVersion(v1);
  const b = parseKubeVersion(v2);
  if (!a && !b) return v2 < v1 ? -1 : v2 > v1 ? 1 : 0; // strings.Compare(v2, v1)
  if (!a) return -1;
  if (!b) return 1;
  if (a.type !== b.type) return sign(a.type - b.type);
  if (a.major !== b.major) return sign(a.major - b.major);
  return sign(a.minor - b.minor);
}

/** Sort versions highest first (a new array), as discovery lists them when priorities tie. */
export function sortKubeAwareVersions(versions: readonly string[]): string[] {
  return [...versions].sort((x, y) => compareKubeAwareVersionStrings(y, x));
}
