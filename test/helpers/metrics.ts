/**
 * Reading counters from a Prometheus text exposition (the proxy's `/metrics`), for tests that must
 * prove which path a request took.
 */

/** Sum of every sample of `name` whose labels include all of `labels` (0 when none). */
export function counterValue(exposition: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have.set(pair[1]!, pair[2]!);
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) total += Number(m[3]);
  }
  return total;
}

/** Fetch `/metrics` from `baseUrl` and read one counter. */
export async function scrapeCounter(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await fetch(new URL('/metrics', baseUrl));
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/metrics: HTTP ${res.status}`);
  return counterValue(await res.text(), name, labels);
}
