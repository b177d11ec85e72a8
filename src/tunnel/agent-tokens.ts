/**
 * `--agent-token-file`: which agent token may serve which cluster. CSV, one `token,cluster-name`
 * per line (blank lines and `#` comments ignored), like kube-apiserver's `--token-auth-file`.
 * The file is re-read when its modification time or size changes (checked on each agent
 * connection), so tokens can be added and revoked without a restart; a file that cannot be read or
 * parsed keeps the last good table and reports why.
 */
import { timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { isValidClusterName } from './protocol.js';

/** Parse the CSV text into token → cluster. Throws an Error naming the line. Pure. */
export function parseAgentTokens(text: string): Map<string, string> {
  const tokens = new Map<string, string>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const fields = line.split(',').map((f) => f.trim().replace(/^"(.*)"$/, '$1'));
    if (fields.length < 2 || fields[0] === '' || fields[1] === '') throw new Error(`line ${i + 1}: want token,cluster-name`);
    if (!isValidClusterName(fields[1]!)) throw new Error(`line ${i + 1}: invalid cluster name ${JSON.stringify(fields[1])}`);
    if (tokens.has(fields[0]!)) throw new Error(`line ${i + 1}: duplicate token`);
    tokens.set(fields[0]!, fields[1]!);
  });
  return tokens;
}

/** Constant-time string comparison (token lookups must not leak prefixes through timing). */
function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The token table behind `--agent-token-file`. */
export class AgentTokenFile {
  readonly path: string;
  #tokens: Map<string, string>;
  #stamp: string;
  /** Why the last re-read failed (the old table is still in use), for the log. */
  lastError: string | undefined;

  /** Read the file now; throws ConfigError when it is missing or malformed. */
  constructor(path: string) {
    this.path = path;
    try {
      this.#stamp = this.#stat();
      this.#tokens = parseAgentTokens(readFileSync(path, 'utf8'));
    } catch (e) {
      throw new ConfigError(`--agent-token-file: ${path}: ${(e as Error).message}`, { cause: e });
    }
  }

  #stat(): string {
    const s = statSync(this.path);
    return `${s.mtimeMs}:${s.size}:${s.ino}`;
  }

  /** Re-read the file if it changed since the last read. */
  refresh(): void {
    try {
      const stamp = this.#stat();
      if (stamp === this.#stamp) return;
      this.#tokens = parseAgentTokens(readFileSync(this.path, 'utf8'));
      this.#stamp = stamp;
      this.lastError = undefined;
    } catch (e) {
      this.lastError = (e as Error).message;
    }
  }

  /** The cluster `token` may serve (after a refresh), or undefined. */
  clusterFor(token: string): string | undefined {
    this.refresh();
    let found: string | undefined;
    for (const [t, cluster] of this.#tokens) if (sameToken(t, token)) found = cluster;
    return found;
  }
}
