/**
 * The package's root folder (where package.json and build/ are), found from a module's own URL:
 * the sources under vitest (`proxy/…`, `src/recording/…`) or the compiled files (`dist/…`). The
 * native addons (build/Release/*.node) are loaded from there.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest folder at or above `moduleUrl`'s folder that holds a package.json (at most 4 up). */
export function packageRoot(moduleUrl: string): string {
  let dir = dirname(fileURLToPath(moduleUrl));
  for (let i = 0; i < 4; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    dir = dirname(dir);
  }
  return dir;
}
