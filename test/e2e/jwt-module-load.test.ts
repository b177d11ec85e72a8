/**
 * What `serve` loads (needs `npm run build`): npm `oidc-provider` (the demo's issuer, an
 * optionalDependency) never, not even with JWT authentication on; the JWT modules (the CEL engine,
 * the config file loader) only when `--authentication-config` or `--oidc-*` is given. Checked with a
 * module resolve hook in a child process that builds the server from dist/.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const DIST = resolve(import.meta.dirname, '../../dist/src');
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ksp-module-load-'));
  writeFileSync(
    join(dir, 'hook.mjs'),
    `export async function resolve(spec, ctx, next) { const r = await next(spec, ctx); if (r.url.startsWith('file:')) process.stderr.write('LOADED ' + r.url + '\\n'); return r; }\n`,
  );
  writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(join(dir, 'hook.mjs')).href)});\n`);
  writeFileSync(
    join(dir, 'auth.yaml'),
    'apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n- issuer:\n    url: https://127.0.0.1:9\n    audiences: [k]\n  claimMappings:\n    username: {claim: sub, prefix: ""}\n',
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The file URLs a child resolves while it builds (and closes) a server with `flags`. */
function loaded(flags: Record<string, string>): string[] {
  const script = `import { resolveConfig } from ${JSON.stringify(pathToFileURL(join(DIST, 'config.js')).href)};
import { buildServer } from ${JSON.stringify(pathToFileURL(join(DIST, 'server.js')).href)};
const app = await buildServer(await resolveConfig(${JSON.stringify({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:1', ...flags })}));
await app.close();`;
  const r = spawnSync(process.execPath, ['--import', join(dir, 'register.mjs'), '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  return r.stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice('LOADED '.length));
}

describe('modules serve loads', () => {
  it('passthrough: no oidc-provider, no CEL engine, no JWT modules', () => {
    const urls = loaded({});
    expect(urls.some((u) => u.includes('/src/server.js'))).toBe(true);
    expect(urls.filter((u) => /node_modules\/(oidc-provider|@marcbachmann)\//.test(u) || /\/src\/auth\/(jwt-authentication|authentication-config-file|cel-environment)\.js$/.test(u))).toEqual([]);
  });

  it('--authentication-config: the JWT modules, still no oidc-provider', () => {
    const urls = loaded({ authn: 'impersonate', authenticationConfig: join(dir, 'auth.yaml') });
    expect(urls.some((u) => u.endsWith('/src/auth/jwt-authentication.js'))).toBe(true);
    expect(urls.some((u) => u.includes('node_modules/@marcbachmann/'))).toBe(true);
    expect(urls.filter((u) => u.includes('node_modules/oidc-provider/'))).toEqual([]);
  });
});
