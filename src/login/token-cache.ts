/**
 * The token cache of `kube-stream-proxy login`, as kubelogin keeps it: one JSON file
 * `{"id_token": ..., "refresh_token": ...}` per provider setting, mode 0600 in a 0700 directory
 * (default `~/.kube/cache/kube-stream-proxy/`, or `$KUBECACHEDIR/kube-stream-proxy/`), named by the
 * SHA-256 of the settings that make a login distinct (issuer, client id and secret, scopes, extra
 * authorization parameters). Written atomically (temporary file and rename). A lock file beside it
 * (`<name>.lock`, created exclusively, holding the owner's pid) makes concurrent kubectl processes
 * wait for one login instead of starting several; a lock whose process is gone is taken over.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink, writeFile, chmod } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** What is cached. */
export interface CachedTokens {
  id_token?: string;
  refresh_token?: string;
}

/** The settings a cache entry belongs to. */
export interface TokenCacheKey {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  scopes: string[];
  extraParams?: Record<string, string>;
}

/** The default cache directory (`$KUBECACHEDIR/kube-stream-proxy` or `~/.kube/cache/kube-stream-proxy`). */
export function defaultTokenCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.KUBECACHEDIR ? env.KUBECACHEDIR : join(homedir(), '.kube', 'cache');
  return join(base, 'kube-stream-proxy');
}

/** The cache file name of `key` (hex SHA-256 of its canonical JSON). */
export function tokenCacheName(key: TokenCacheKey): string {
  const canonical = JSON.stringify({
    issuer: key.issuer,
    clientId: key.clientId,
    clientSecret: key.clientSecret ?? '',
    scopes: [...key.scopes].sort(),
    extraParams: Object.entries(key.extraParams ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  });
  return createHash('sha256').update(canonical).digest('hex');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One cache entry and its lock. */
export class TokenCache {
  readonly file: string;
  readonly #lock: string;
  #locked = false;

  constructor(readonly dir: string, key: TokenCacheKey) {
    const name = tokenCacheName(key);
    this.file = join(dir, `${name}.json`);
    this.#lock = join(dir, `${name}.lock`);
  }

  /** The cached tokens (empty when there are none or the file is unreadable). */
  async load(): Promise<CachedTokens> {
    try {
      const v = JSON.parse(await readFile(this.file, 'utf8')) as CachedTokens;
      return {
        ...(typeof v.id_token === 'string' ? { id_token: v.id_token } : {}),
        ...(typeof v.refresh_token === 'string' ? { refresh_token: v.refresh_token } : {}),
      };
    } catch {
      return {};
    }
  }

  /** Replace the cached tokens (0600, atomically). */
  async save(tokens: CachedTokens): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(tokens), { mode: 0o600 });
    await chmod(tmp, 0o600);
    await rename(tmp, this.file);
  }

  /** Forget the cached tokens. */
  async clear(): Promise<void> {
    await unlink(this.file).catch(() => {});
  }

  /** Take the lock, waiting (polling every `pollMs`) for another process's login up to `timeoutMs`. */
  async lock(timeoutMs: number, pollMs = 100): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const h = await open(this.#lock, 'wx', 0o600);
        await h.writeFile(String(process.pid));
        await h.close();
        this.#locked = true;
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const owner = Number((await readFile(this.#lock, 'utf8').catch(() => '')).trim());
      if (!Number.isInteger(owner) || owner <= 0 || !alive(owner)) {
        await unlink(this.#lock).catch(() => {});
        continue;
      }
      if (Date.now() > deadline) throw new Error(`another login holds ${this.#lock} (pid ${owner})`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /** Release the lock if held. */
  async unlock(): Promise<void> {
    if (!this.#locked) return;
    this.#locked = false;
    await unlink(this.#lock).catch(() => {});
  }
}
