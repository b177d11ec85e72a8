/**
 * The floor experiment for the translation's CPU per byte: the bare Node relay (net + pipe(), as in
 * bench/bare-relay.ts) running inside a process that also carries what the proxy carries, without any
 * of the proxy's per-byte work. `KSP_HEAVY_MODE` picks what:
 * - `serve` (default): a whole proxy (`serve`, idle) in front of the same upstream, so the relay pays
 *   the proxy's heap (~40 MiB live: fastify, client-node, prom-client, …) and timers;
 * - `import`: the proxy's modules imported (src/cli.js), no server started;
 * - `ballast`: nothing of the proxy, a live object graph instead (~80 MiB used heap: the heap's size
 *   alone, which turned out not to be what makes the proxy's process dear; src/heap-floor.ts says what is).
 * `KSP_V8_FLAGS` applies V8 flags at run time (`v8.setFlagsFromString`) before anything is loaded;
 * `KSP_GC_STATS=PREFIX` counts GCs by kind and writes them to PREFIX-PID.json on SIGUSR2
 * (bench/profile/floor.ts reads them).
 *
 *   node dist/bench/profile/heavy-bare-relay.js http://HOST:PORT
 *
 * Prints "bare relay listening on http://127.0.0.1:N" once both are up. Also `--cpu-prof`-able.
 */
import { connect, createServer } from 'node:net';

const upstream = new URL(process.argv[2] ?? 'http://127.0.0.1:1');
const mode = process.env.KSP_HEAVY_MODE ?? 'serve';
const keep: unknown[] = [];
if (process.env.KSP_V8_FLAGS) (await import('node:v8')).setFlagsFromString(process.env.KSP_V8_FLAGS);
if (mode === 'serve' || mode === 'import') {
  const { main } = await import('../../src/cli.js');
  // The proxy itself, idle, in front of the same upstream (its listening line goes to stdout first).
  if (mode === 'serve') void main(['serve', '--listen', '127.0.0.1:0', '--upstream', upstream.href.replace(/\/$/, '')]);
} else if (mode === 'ballast') {
  // Small live objects, linked (what a major GC has to mark): ~80 MiB of used heap.
  for (let i = 0; i < 400_000; i++) keep.push({ i, s: `object ${i}`, a: [i, i + 1, i + 2], next: keep[i - 1] });
} else {
  throw new Error(`KSP_HEAVY_MODE: want serve, import or ballast, got ${mode}`);
}
if (process.env.KSP_GC_STATS) {
  // GC counts by kind (perf_hooks), written to KSP_GC_STATS-<pid>.json on SIGUSR2 (floor.ts sends it after each transfer).
  const { observeGcByKind } = await import('./gc-kinds.js');
  const { writeFileSync } = await import('node:fs');
  const counts: Record<string, { n: number; ms: number }> = {};
  observeGcByKind((kind, ms) => {
    const c = (counts[kind] ??= { n: 0, ms: 0 });
    c.n++;
    c.ms += ms;
  });
  process.on('SIGUSR2', () => writeFileSync(`${process.env.KSP_GC_STATS}-${process.pid}.json`, JSON.stringify({ counts, heap: process.memoryUsage() })));
}
const server = createServer({ noDelay: true }, (client) => {
  const up = connect({ host: upstream.hostname, port: Number(upstream.port), noDelay: true });
  const close = (): void => void (client.destroy(), up.destroy());
  client.pipe(up).on('error', close).on('close', close);
  up.pipe(client).on('error', close).on('close', close);
});
setTimeout(() => {
  server.listen(0, '127.0.0.1', () => console.log(`bare relay listening on http://127.0.0.1:${(server.address() as { port: number }).port}`));
}, 2_000);
