/**
 * The cost budget of one CEL evaluation, as kube-apiserver sets it for every CEL program of its base
 * environment, the authentication expressions included (`cel.CostLimit(celconfig.PerCallLimit)`,
 * `k8s.io/apiserver/pkg/apis/cel/config.go`): an evaluation that spends more than
 * {@link PER_CALL_LIMIT} stops with cel-go's error `operation cancelled: actual cost limit exceeded`,
 * and the token is refused.
 *
 * `@marcbachmann/cel-js` counts no cost, so it is counted here the way cel-go's runtime cost tracker
 * does: one unit per evaluated sub-expression (cel-js evaluates each one through its evaluator's
 * `run`, which {@link meterEvaluator} wraps), plus cel-go's traversal cost for every string and list a
 * sub-expression yields (`StringTraversalCostFactor`, 0.1 per character or element), plus what a
 * function charges for its own work through {@link chargeCost} (the regular expressions:
 * `cel-regex.ts`). The totals are cel-go's order of magnitude, not its exact figures
 * (docs/security.md, "Deviations from kube-apiserver").
 *
 * Evaluation is synchronous, so exactly one meter is in force at a time: the one
 * {@link evaluateWithinBudget} installed.
 */
import assert from 'node:assert/strict';

/** kube-apiserver's `PerCallLimit`: the most one evaluation may cost. */
export const PER_CALL_LIMIT = 1_000_000;

/** cel-go's `StringTraversalCostFactor`: the cost of looking at one character (or list element). */
export const STRING_TRAVERSAL_COST_FACTOR = 0.1;

/** An evaluation that went over its budget; the message is cel-go's. */
export class CelCostLimitError extends Error {
  override readonly name = 'CelCostLimitError';
  readonly code = 'KSP_ERR_CEL_COST_LIMIT' as const;
  constructor(readonly limit: number) {
    super('operation cancelled: actual cost limit exceeded');
  }
}

interface Meter {
  cost: number;
  readonly limit: number;
}

let meter: Meter | undefined;

/**
 * Charge `units` to the evaluation in progress (none outside {@link evaluateWithinBudget}); throws
 * {@link CelCostLimitError} once the total is over the limit, before the caller does the work.
 */
export function chargeCost(units: number): void {
  const m = meter;
  if (m === undefined) return;
  m.cost += units;
  if (m.cost > m.limit) throw new CelCostLimitError(m.limit);
}

/** The traversal cost of a value: strings and lists by size, anything else nothing. */
export function traversalCost(v: unknown): number {
  return typeof v === 'string' || Array.isArray(v) ? Math.ceil(v.length * STRING_TRAVERSAL_COST_FACTOR) : 0;
}

/** The part of cel-js's evaluator this wraps: it evaluates every sub-expression through `run`. */
export interface CelEvaluator {
  run(ast: { op?: unknown }, ctx: unknown): unknown;
}

const metered = new WeakSet<object>();

/**
 * Count every sub-expression `evaluator` evaluates against the meter in force. The comprehension's
 * accumulator nodes (`accu*`) are charged one unit, not their size: cel-go charges a comprehension by
 * its steps, not by the list it builds.
 */
export function meterEvaluator(evaluator: CelEvaluator): void {
  if (metered.has(evaluator)) return;
  const run = evaluator.run;
  evaluator.run = function meteredRun(this: CelEvaluator, ast, ctx) {
    chargeCost(1);
    const v = run.call(this, ast, ctx);
    if (meter !== undefined && !(typeof ast.op === 'string' && ast.op.startsWith('accu'))) chargeCost(traversalCost(v));
    return v;
  };
  metered.add(evaluator);
}

/**
 * Run one evaluation under a fresh budget of `limit`; its value, or {@link CelCostLimitError}. An
 * over-budget error that the expression swallowed (CEL's `||`, `&&` and `exists` absorb errors when
 * the other side decides) still fails the evaluation: once over, every further step throws at once,
 * so the rest costs nothing, and the result is refused here.
 */
export function evaluateWithinBudget<T>(evaluate: () => T, limit = PER_CALL_LIMIT): T {
  assert.equal(meter, undefined, 'CEL evaluations do not nest');
  const m: Meter = { cost: 0, limit };
  meter = m;
  try {
    chargeCost(1); // the root expression (its parent is this call, not the evaluator's `run`)
    const value = evaluate();
    // A pending Promise would run outside the meter: nothing registered here is asynchronous.
    assert.ok(!(value instanceof Promise), 'CEL evaluation must be synchronous');
    if (m.cost > m.limit) throw new CelCostLimitError(limit);
    return value;
  } finally {
    meter = undefined;
  }
}
