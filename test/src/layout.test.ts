/**
 * The layout rule of issue 24: `src/` is the proxy alone. The dev systems (dev cluster, dev-metrics,
 * the demo) live in `dev/`, and nothing under src/, handlers/, proxy/ or translator/ imports them,
 * except the CLI's subcommands, which load them on demand (`import()`), so `serve` and `agent` never do.
 * And no module imports itself back through others (the import circles issue 24 named are broken:
 * upgrade-aware ⇄ upstream-exchange, route ⇄ upstream, agent ⇄ agent-stream).
 * And arrows point down, as in Kubernetes (issues 31 and 32): the wire helpers every path shares sit in
 * `src/wire/`, below everything that dials or relays; nothing in `src/` imports `handlers/`, `proxy/` or
 * `translator/` (the server and the CLI excepted); the relays never import `handlers/`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Every relative import specifier in `text`, with whether it is a dynamic `import()`. */
function imports(text: string): Array<{ spec: string; dynamic: boolean }> {
  const out: Array<{ spec: string; dynamic: boolean }> = [];
  for (const m of text.matchAll(/\b(from|import)\s*(\()?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) out.push({ spec: m[3]!, dynamic: m[2] === '(' });
  return out;
}

describe('layout: src/ is the proxy alone', () => {
  const proxyFiles = ['src', 'handlers', 'proxy', 'translator'].flatMap((d) => sources(join(ROOT, d)));

  it('has the dev systems in dev/, not in src/', () => {
    for (const gone of ['src/devcluster', 'src/devmetrics', 'src/demo.ts']) expect(() => statSync(join(ROOT, gone)), gone).toThrow();
    for (const here of ['dev/cluster/dev-cluster.ts', 'dev/metrics/dev-metrics.ts', 'dev/demo.ts']) expect(statSync(join(ROOT, here)).isFile(), here).toBe(true);
  });

  it('imports nothing from dev/ in the proxy, except the CLI subcommands, on demand', () => {
    const offenders: string[] = [];
    for (const file of proxyFiles) {
      for (const { spec, dynamic } of imports(readFileSync(file, 'utf8'))) {
        const target = relative(ROOT, join(file, '..', spec));
        if (!target.startsWith('dev/')) continue;
        if (relative(ROOT, file) === 'src/cli.ts' && dynamic) continue;
        offenders.push(`${relative(ROOT, file)} imports ${spec}${dynamic ? '' : ' (static)'}`);
      }
    }
    expect(offenders).toEqual([]);
    // The rule is not vacuous: the CLI does load the dev commands.
    expect(imports(readFileSync(join(ROOT, 'src/cli.ts'), 'utf8')).filter((i) => i.dynamic && i.spec.startsWith('../dev/')).length).toBeGreaterThanOrEqual(3);
  });
});

describe('layout: no import circles', () => {
  it('has none among src/, dev/, handlers/, proxy/ and translator/ (type-only imports included)', () => {
    const files = ['src', 'dev', 'handlers', 'proxy', 'translator'].flatMap((d) => sources(join(ROOT, d)));
    const graph = new Map<string, string[]>();
    for (const file of files) {
      graph.set(
        file,
        imports(readFileSync(file, 'utf8')).map(({ spec }) => join(file, '..', spec).replace(/\.js$/, '.ts')).filter((t) => t.endsWith('.ts')),
      );
    }
    // Depth-first search for a back edge; report the circle it closes.
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const visit = (file: string, path: string[]): void => {
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) {
        if (!graph.has(next)) continue;
        if (state.get(next) === 'open') circles.push([...path.slice(path.indexOf(next)), next].map((f) => relative(ROOT, f)).join(' → '));
        else if (!state.has(next)) visit(next, [...path, next]);
      }
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file, [file]);
    expect(circles).toEqual([]);
  });
});

describe('layout: arrows point down', () => {
  /** `[importer, target]` for every static or dynamic relative import of the files under `dirs`. */
  function edges(dirs: string[]): Array<[string, string]> {
    return dirs.flatMap((d) => sources(join(ROOT, d))).flatMap((file) =>
      imports(readFileSync(file, 'utf8')).map(({ spec }): [string, string] => [relative(ROOT, file), relative(ROOT, join(file, '..', spec))]),
    );
  }
  const ABOVE_SRC = ['handlers/', 'proxy/', 'translator/'];

  it('has nothing in src/ import handlers/, proxy/ or translator/ (the server and the CLI excepted)', () => {
    const all = edges(['src']).filter(([, target]) => ABOVE_SRC.some((room) => target.startsWith(room)));
    const offenders = all.filter(([file]) => file !== 'src/server.ts' && file !== 'src/cli.ts');
    expect(offenders.map(([f, t]) => `${f} → ${t}`)).toEqual([]);
    // Not vacuous: the server does assemble the rooms above.
    expect(all.length).toBeGreaterThan(0);
  });

  it('has the relays (proxy/, translator/) import nothing from handlers/', () => {
    const offenders = edges(['proxy', 'translator']).filter(([, target]) => target.startsWith('handlers/'));
    expect(offenders.map(([f, t]) => `${f} → ${t}`)).toEqual([]);
  });

  it('has src/wire/ import only itself and the leaf modules (status, errors, stream protocol names)', () => {
    const leaves = new Set(['src/status.js', 'src/errors.js', 'src/stream-protocol.js']);
    const offenders = edges(['src/wire']).filter(([, target]) => !target.startsWith('src/wire/') && !leaves.has(target));
    expect(offenders.map(([f, t]) => `${f} → ${t}`)).toEqual([]);
  });
});
