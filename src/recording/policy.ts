/**
 * The recording policy: request attributes in, decision out (pure). Rules are tried in order and
 * the first that matches decides; when none matches, nothing is recorded.
 *
 * A rule matches when every matcher it has matches: a list matches when any of its patterns does
 * (`*` matches any run of characters, everything else is literal), `groups` when any of the caller's
 * groups matches, `tty` when it equals the request's.
 *
 * Attributes the proxy does not know — the user and groups in `--authn passthrough` (the token is
 * opaque to the proxy), the container when the request names none (the kubelet picks the default
 * one) — are decided against the safe side: they match every pattern of a rule that records, and
 * no pattern of a rule that exempts (`record: none`). So an unknown caller is recorded by a rule for
 * "alice", and is never exempted by a rule for "ci-bot".
 */

/** What is recorded: nothing, the output (stdout, stderr, resizes), or the output and stdin. */
export type RecordMode = 'none' | 'output' | 'full';

/** A compiled pattern. */
export interface Pattern {
  readonly source: string;
  test(value: string): boolean;
}

/** The matchers of one rule (absent = any). */
export interface RuleMatch {
  users?: Pattern[];
  groups?: Pattern[];
  clusters?: Pattern[];
  namespaces?: Pattern[];
  pods?: Pattern[];
  containers?: Pattern[];
  subresources?: Array<'exec' | 'attach' | 'portforward'>;
  tty?: boolean;
}

/** One validated rule. */
export interface RecordingRule {
  /** Its `name`, or `rules[i]`. */
  name: string;
  match: RuleMatch;
  record: RecordMode;
  enforce: boolean;
}

/** A validated policy (`recording-config.ts` builds it). */
export interface RecordingPolicy {
  rules: readonly RecordingRule[];
}

/** The policy that records nothing (no `--session-recording-config`). */
export const RECORD_NOTHING: RecordingPolicy = { rules: [] };

/** The attributes of a streaming request the policy decides on. */
export interface RecordingRequest {
  /** The verified user; undefined when the proxy does not know it (passthrough). */
  user?: string;
  /** The verified groups; undefined with `user`. */
  groups?: readonly string[];
  /** The agent cluster; "" or undefined for the proxy's own upstream. */
  cluster?: string;
  namespace: string;
  pod: string;
  /** The `container` parameter; undefined when the request names none. */
  container?: string;
  subresource: 'exec' | 'attach' | 'portforward';
  /** exec/attach `tty`; false for port-forward. */
  tty: boolean;
}

/** The decision for one request. */
export interface RecordingDecision {
  record: RecordMode;
  enforce: boolean;
  /** The rule that decided; undefined when none matched. */
  rule?: string;
}

const NOT_RECORDED: RecordingDecision = Object.freeze({ record: 'none', enforce: false });

/** Compile a `*` glob (anchored; `*` = any run of characters, possibly empty). */
export function compilePattern(source: string): Pattern {
  if (!source.includes('*')) return { source, test: (v) => v === source };
  const parts = source.split('*');
  return {
    source,
    test(v: string): boolean {
      const first = parts[0]!;
      const last = parts[parts.length - 1]!;
      if (v.length < first.length + last.length || !v.startsWith(first) || !v.endsWith(last)) return false;
      let at = first.length;
      const end = v.length - last.length;
      for (let i = 1; i < parts.length - 1; i++) {
        const found = v.indexOf(parts[i]!, at);
        if (found < 0 || found + parts[i]!.length > end) return false;
        at = found + parts[i]!.length;
      }
      return true;
    },
  };
}

function anyMatches(patterns: readonly Pattern[], value: string | undefined, unknownMatches: boolean): boolean {
  if (value === undefined) return unknownMatches;
  return patterns.some((p) => p.test(value));
}

function ruleMatches(rule: RecordingRule, r: RecordingRequest): boolean {
  const m = rule.match;
  // Unknown attributes match rules that record, never rules that exempt.
  const unknown = rule.record !== 'none';
  if (m.subresources && !m.subresources.includes(r.subresource)) return false;
  if (m.tty !== undefined && (r.subresource === 'portforward' || m.tty !== r.tty)) return false;
  if (m.namespaces && !anyMatches(m.namespaces, r.namespace, unknown)) return false;
  if (m.pods && !anyMatches(m.pods, r.pod, unknown)) return false;
  if (m.clusters && !anyMatches(m.clusters, r.cluster ?? '', unknown)) return false;
  if (m.containers && r.subresource !== 'portforward' && !anyMatches(m.containers, r.container, unknown)) return false;
  if (m.containers && r.subresource === 'portforward') return false;
  if (m.users && !anyMatches(m.users, r.user, unknown)) return false;
  if (m.groups) {
    if (r.groups === undefined || r.user === undefined) {
      if (!unknown) return false;
    } else if (!r.groups.some((g) => m.groups!.some((p) => p.test(g)))) return false;
  }
  return true;
}

/** Decide whether and how `request` is recorded. */
export function decideRecording(policy: RecordingPolicy, request: RecordingRequest): RecordingDecision {
  for (const rule of policy.rules) {
    if (ruleMatches(rule, request)) {
      return rule.record === 'none' ? { record: 'none', enforce: false, rule: rule.name } : { record: rule.record, enforce: rule.enforce, rule: rule.name };
    }
  }
  return NOT_RECORDED;
}
