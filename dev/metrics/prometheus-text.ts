/**
 * A parser for the Prometheus text exposition format 0.0.4, the format of the kubelet's
 * `/metrics/resource` (metrics-server reads it with Prometheus' own `textparse`). Strict: a line that
 * is not a comment, a `# HELP`/`# TYPE` line or a well-formed sample is an error naming the line.
 * Pure.
 */

/** One sample line. */
export interface PrometheusSample {
  name: string;
  labels: Record<string, string>;
  value: number;
  /** Milliseconds since the epoch, when the line carries one. */
  timestampMs?: number;
}

/** A parsed exposition. */
export interface PrometheusExposition {
  /** `# TYPE` per metric family name. */
  types: Map<string, string>;
  /** `# HELP` per metric family name. */
  help: Map<string, string>;
  samples: PrometheusSample[];
}

/** The text is not valid exposition format. */
export class PrometheusParseError extends Error {
  readonly code = 'PROMETHEUS_PARSE_ERROR';
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(`line ${line}: ${message}`);
    this.name = 'PrometheusParseError';
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** A sample value (Go's ParseFloat spellings, plus the format's `+Inf`/`-Inf`/`NaN`). */
function parseValue(text: string): number | undefined {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/** Parse `{a="b",c="d"}` starting at `text[0] === '{'`; returns the labels and the rest of the line. */
function parseLabels(text: string, line: number): [Record<string, string>, string] {
  const labels: Record<string, string> = {};
  let rest = text.slice(1).trimStart();
  while (!rest.startsWith('}')) {
    const name = LABEL_NAME.exec(rest)?.[0];
    if (!name) throw new PrometheusParseError(line, `invalid label name at "${rest.slice(0, 20)}"`);
    rest = rest.slice(name.length).trimStart();
    if (!rest.startsWith('="') && !rest.startsWith('= "')) throw new PrometheusParseError(line, `expected ="…" after label ${name}`);
    rest = rest.slice(rest.indexOf('"') + 1);
    let value = '';
    for (;;) {
      const c = rest[0];
      if (c === undefined) throw new PrometheusParseError(line, `unterminated value of label ${name}`);
      rest = rest.slice(1);
      if (c === '"') break;
      if (c === '\\') {
        const e = rest[0];
        rest = rest.slice(1);
        if (e === 'n') value += '\n';
        else if (e === '\\' || e === '"') value += e;
        else throw new PrometheusParseError(line, `invalid escape \\${e ?? ''} in label ${name}`);
      } else value += c;
    }
    if (name in labels) throw new PrometheusParseError(line, `duplicate label ${name}`);
    labels[name] = value;
    rest = rest.trimStart();
    if (rest.startsWith(',')) rest = rest.slice(1).trimStart();
    else if (!rest.startsWith('}')) throw new PrometheusParseError(line, `expected , or } after label ${name}`);
  }
  return [labels, rest.slice(1)];
}

/** Parse an exposition; throws {@link PrometheusParseError}. */
export function parsePrometheusText(text: string): PrometheusExposition {
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: PrometheusSample[] = [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  lines.forEach((raw, i) => {
    const line = i + 1;
    const text = raw.trim();
    if (text === '') return;
    if (text.startsWith('#')) {
      const m = /^#\s*(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(text);
      if (!m) return; // an ordinary comment
      const [, kind, name, rest = ''] = m as unknown as [string, string, string, string | undefined];
      if (!METRIC_NAME.test(name) || METRIC_NAME.exec(name)![0] !== name) throw new PrometheusParseError(line, `invalid metric name ${name}`);
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new PrometheusParseError(line, `invalid metric type "${rest}"`);
        if (types.has(name)) throw new PrometheusParseError(line, `second TYPE line for ${name}`);
        if (samples.some((s) => s.name === name)) throw new PrometheusParseError(line, `TYPE line for ${name} after its samples`);
        types.set(name, rest);
      } else {
        help.set(name, rest);
      }
      return;
    }
    const name = METRIC_NAME.exec(text)?.[0];
    if (!name) throw new PrometheusParseError(line, `invalid metric name at "${text.slice(0, 20)}"`);
    let rest = text.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) [labels, rest] = parseLabels(rest, line);
    const fields = rest.trim().split(/\s+/);
    if (!/^\s/.test(rest) || fields.length < 1 || fields.length > 2 || fields[0] === '') {
      throw new PrometheusParseError(line, `expected "value [timestamp]" after ${name}`);
    }
    const value = parseValue(fields[0]!);
    if (value === undefined) throw new PrometheusParseError(line, `invalid value "${fields[0]}"`);
    const sample: PrometheusSample = { name, labels, value };
    if (fields[1] !== undefined) {
      if (!/^-?\d+$/.test(fields[1])) throw new PrometheusParseError(line, `invalid timestamp "${fields[1]}"`);
      sample.timestampMs = Number(fields[1]);
    }
    samples.push(sample);
  });
  return { types, help, samples };
}
