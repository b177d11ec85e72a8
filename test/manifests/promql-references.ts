/**
 * What a PromQL expression refers to — the metric and label names of its selectors, the labels of its
 * `by`/`without`/`on`/`ignoring`/`group_left`/`group_right` clauses — read with the Prometheus
 * project's own PromQL grammar for JavaScript (`@prometheus-io/lezer-promql`, the parser of
 * Prometheus's web UI), not with regular expressions. Used to check the alert rules against a real
 * exposition (test/manifests/alert-metrics.test.ts).
 */
import { parser } from '@prometheus-io/lezer-promql';

/** One label matcher of a selector: `label op "value"`. */
export interface MatcherRef {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

/** One vector selector: its metric name and its other matchers. */
export interface SelectorRef {
  metric: string;
  matchers: MatcherRef[];
  /** The selector's text, for messages. */
  text: string;
}

/** The labels of one grouping or vector-matching clause and the selectors under it. */
export interface GroupingRef {
  clause: 'by' | 'without' | 'on' | 'ignoring' | 'group_left' | 'group_right';
  labels: string[];
  /** Metric names of the selectors of the aggregation or binary operation the clause belongs to. */
  metrics: string[];
  text: string;
}

/** What {@link promqlReferences} found. */
export interface PromqlReferences {
  selectors: SelectorRef[];
  groupings: GroupingRef[];
}

/** A PromQL text the grammar rejects, or a selector without a literal metric name. */
export class PromqlReferenceError extends Error {
  override name = 'PromqlReferenceError';
}

type Node = ReturnType<typeof parser.parse>['topNode'];

const CLAUSES: Record<string, GroupingRef['clause']> = {
  By: 'by',
  Without: 'without',
  On: 'on',
  Ignoring: 'ignoring',
  GroupLeft: 'group_left',
  GroupRight: 'group_right',
};

/** The value of a PromQL string literal ("…", '…' or `…`). */
function unquote(literal: string): string {
  const q = literal[0];
  const body = literal.slice(1, -1);
  if (q === '`') return body;
  if (q === "'") return JSON.parse(`"${body.replace(/\\'/g, "'").replace(/"/g, '\\"')}"`) as string;
  return JSON.parse(literal) as string;
}

function children(n: Node): Node[] {
  const out: Node[] = [];
  for (let c = n.firstChild; c; c = c.nextSibling) out.push(c);
  return out;
}

function descendants(n: Node, name: string): Node[] {
  const out: Node[] = [];
  const walk = (x: Node): void => {
    for (const c of children(x)) {
      if (c.name === name) out.push(c);
      walk(c);
    }
  };
  walk(n);
  return out;
}

/** Every selector, grouping clause and matching clause of `expr`. Throws {@link PromqlReferenceError}. */
export function promqlReferences(expr: string): PromqlReferences {
  const tree = parser.parse(expr);
  const text = (n: Node): string => expr.slice(n.from, n.to);
  let error: Node | undefined;
  tree.iterate({
    enter: (n) => {
      if (n.type.isError && !error) error = n.node;
    },
  });
  if (error) throw new PromqlReferenceError(`PromQL does not parse at offset ${error.from}: ${JSON.stringify(expr.slice(Math.max(0, error.from - 20), error.from + 20))}`);

  const selectorOf = (sel: Node): SelectorRef => {
    const metric = children(sel).find((c) => c.name === 'Identifier');
    const matchers: MatcherRef[] = [];
    let name = metric ? text(metric) : undefined;
    for (const m of descendants(sel, 'UnquotedLabelMatcher').concat(descendants(sel, 'QuotedLabelMatcher'))) {
      const [labelNode, opNode, valueNode] = children(m);
      const label = labelNode!.name === 'QuotedLabelName' ? unquote(text(labelNode!)) : text(labelNode!);
      const matcher: MatcherRef = { label, op: text(opNode!) as MatcherRef['op'], value: unquote(text(valueNode!)) };
      if (label === '__name__' && matcher.op === '=') name = matcher.value;
      else matchers.push(matcher);
    }
    // `{"metric.name"}`: a quoted name alone inside the braces.
    for (const q of descendants(sel, 'LabelMatchers').flatMap((lm) => children(lm).filter((c) => c.name === 'QuotedLabelName'))) name = unquote(text(q));
    if (name === undefined) throw new PromqlReferenceError(`selector without a literal metric name: ${text(sel)}`);
    return { metric: name, matchers, text: text(sel) };
  };

  const selectors = descendants(tree.topNode, 'VectorSelector').map((s) => ({ node: s, ref: selectorOf(s) }));
  const within = (scope: Node): string[] => [...new Set(selectors.filter((s) => s.node.from >= scope.from && s.node.to <= scope.to).map((s) => s.ref.metric))];

  const groupings: GroupingRef[] = [];
  for (const clause of descendants(tree.topNode, 'AggregateModifier').concat(descendants(tree.topNode, 'MatchingModifierClause'))) {
    // The aggregation or binary operation the clause modifies.
    const scope = clause.parent!;
    let current: GroupingRef['clause'] | undefined;
    for (const c of children(clause)) {
      if (CLAUSES[c.name]) {
        current = CLAUSES[c.name];
        // `group_left` without labels still names the clause.
        if (current === 'group_left' || current === 'group_right') groupings.push({ clause: current, labels: [], metrics: within(scope), text: text(clause) });
      } else if (c.name === 'GroupingLabels' && current) {
        const labels = children(c).map((l) => (l.name === 'QuotedLabelName' ? unquote(text(l)) : text(l)));
        const last = groupings[groupings.length - 1];
        if ((current === 'group_left' || current === 'group_right') && last?.clause === current && last.labels.length === 0) last.labels = labels;
        else groupings.push({ clause: current, labels, metrics: within(scope), text: text(clause) });
      }
    }
  }
  return { selectors: selectors.map((s) => s.ref), groupings };
}
