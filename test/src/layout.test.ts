/**
 * The layout rule of issue 24: `src/` is the proxy alone. The dev systems (dev cluster, dev-metrics,
 * the demo) live in `dev/`, and nothing under src/, handlers/, proxy/ or translator/ imports them,
 * except the CLI's subcommands, which load them on demand (`import()`), so `serve` and `agent` never do.
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
