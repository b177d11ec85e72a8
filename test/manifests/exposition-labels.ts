/**
 * The sample names of a Prometheus text exposition with, for each, the label names and values its
 * samples carry (`# HELP`/`# TYPE` lines name families that may have no sample yet, listed apart).
 * For checking alert rules against what a real run exported.
 */

/** Label name → the values seen, per sample name. */
export type ExpositionLabels = Map<string, Map<string, Set<string>>>;

/** What {@link readExposition} found. */
export interface Exposition {
  /** Sample names (`x_total`, `h_bucket`, `h_count`…) with their labels and values. */
  samples: ExpositionLabels;
  /** Family names of `# TYPE` lines. */
  families: Set<string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+(?:\s+\S+)?$/;
const PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/gy;

/** Parse `text`; throws on a line that is neither a comment nor a sample. */
export function readExposition(...texts: string[]): Exposition {
  const samples: ExpositionLabels = new Map();
  const families = new Set<string>();
  for (const line of texts.join('\n').split('\n')) {
    if (line.trim() === '') continue;
    const type = /^# TYPE (\S+) /.exec(line);
    if (type) families.add(type[1]!);
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not an exposition line: ${JSON.stringify(line)}`);
    const labels = samples.get(m[1]!) ?? new Map<string, Set<string>>();
    samples.set(m[1]!, labels);
    const body = m[2] ?? '';
    PAIR.lastIndex = 0;
    let read = 0;
    for (let p = PAIR.exec(body); p; p = PAIR.exec(body)) {
      const value = JSON.parse(`"${p[2]!}"`) as string;
      (labels.get(p[1]!) ?? labels.set(p[1]!, new Set()).get(p[1]!)!).add(value);
      read = PAIR.lastIndex;
    }
    if (read !== body.length) throw new Error(`labels not read to the end: ${JSON.stringify(line)}`);
  }
  return { samples, families };
}
