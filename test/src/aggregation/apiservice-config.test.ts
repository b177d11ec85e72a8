/**
 * APIServiceConfig: start-up errors, reloads on edit (add, remove), rejected edits keep the last good
 * set, and a ConfigMap-style `..data` symlink swap. Synchronised on the emitted events, each with a
 * bounded deadline; no sleeps.
 */
import { EventEmitter, once } from 'node:events';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { APIServiceConfig, type APIServiceConfigLogger } from '../../../src/aggregation/apiservice-config.js';
import type { APIService } from '../../../src/aggregation/apiservice.js';

/** One APIService document for group `g` (version v1). */
function doc(group: string, extra = ''): string {
  return `apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.${group}}\nspec: {group: ${group}, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, service: {namespace: ns, name: api}${extra}}\n`;
}

/** The next `event` of `emitter`, or a rejection after `ms` (a deadline, not a synchronisation). */
async function next<T extends unknown[]>(emitter: EventEmitter, event: string, ms = 10_000): Promise<T> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  try {
    return (await once(emitter, event, { signal: ac.signal })) as T;
  } catch (e) {
    if (ac.signal.aborted) throw new Error(`no '${event}' event within ${ms} ms`);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

const names = (set: readonly APIService[]) => set.map((a) => a.metadata.name);

function recordingLogger() {
  const lines: Array<[string, string]> = [];
  const log: APIServiceConfigLogger = {
    info: (m) => lines.push(['info', m]),
    warn: (m) => lines.push(['warn', m]),
    error: (m) => lines.push(['error', m]),
  };
  return { log, lines };
}

let dir: string;
let config: APIServiceConfig | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ksp-apiservice-config-'));
});
afterEach(async () => {
  config?.close();
  config = undefined;
  await rm(dir, { recursive: true, force: true });
});

describe('APIServiceConfig', () => {
  it('throws ConfigError at start-up for a missing file or an invalid APIService', async () => {
    await expect(APIServiceConfig.load(join(dir, 'absent.yaml'))).rejects.toThrow(/--apiservice-config .*absent\.yaml: cannot read the file \(ENOENT\)/);
    const file = join(dir, 'bad.yaml');
    await writeFile(file, doc('a.io').replace('versionPriority: 15', 'versionPriority: 0'));
    const err = await APIServiceConfig.load(file).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('bad.yaml: invalid APIService configuration:\n  document 1 (line 1) (APIService "v1.a.io"): spec.versionPriority: Invalid value: 0');
  });

  it('emits the new set when an APIService is added and when one is removed', async () => {
    const file = join(dir, 'apiservices.yaml');
    await writeFile(file, doc('a.io'));
    config = await APIServiceConfig.load(file, { debounceMs: 20 });
    expect(names(config.current)).toEqual(['v1.a.io']);

    let changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, `${doc('a.io')}---\n${doc('b.io')}`);
    expect(names((await changed)[0])).toEqual(['v1.a.io', 'v1.b.io']);
    expect(names(config.current)).toEqual(['v1.a.io', 'v1.b.io']);

    changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, doc('b.io'));
    expect(names((await changed)[0])).toEqual(['v1.b.io']);
  });

  it('keeps the last good set on an invalid edit, logs the rejection, and takes the next good edit', async () => {
    const file = join(dir, 'apiservices.yaml');
    await writeFile(file, doc('a.io'));
    const { log, lines } = recordingLogger();
    config = await APIServiceConfig.load(file, { debounceMs: 20, logger: log });
    const changes: Array<readonly APIService[]> = [];
    config.on('change', (s) => changes.push(s));

    const rejected = next<[ConfigError]>(config, 'rejected');
    await writeFile(file, `${doc('a.io')}---\n${doc('b.io').replace('groupPriorityMinimum: 1000', 'groupPriorityMinimum: 30000')}`);
    const [err] = await rejected;
    expect(err.message).toContain('(APIService "v1.b.io"): spec.groupPriorityMinimum: Invalid value: 30000');
    expect(names(config.current)).toEqual(['v1.a.io']);
    expect(lines.some(([level, m]) => level === 'error' && m.includes('spec.groupPriorityMinimum') && m.includes('keeping the previous 1 APIServices'))).toBe(true);

    const changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, `${doc('a.io')}---\n${doc('c.io')}`);
    expect(names((await changed)[0])).toEqual(['v1.a.io', 'v1.c.io']);
    expect(changes).toHaveLength(1);
  });

  it('follows a ConfigMap-style ..data symlink swap', async () => {
    // The kubelet's AtomicWriter layout: FILE -> ..data/FILE, ..data -> ..<timestamp>/.
    await mkdir(join(dir, '..2026_12_01_10_00_00.1'));
    await writeFile(join(dir, '..2026_12_01_10_00_00.1', 'apiservices.yaml'), doc('a.io'));
    await symlink('..2026_12_01_10_00_00.1', join(dir, '..data'));
    await symlink('..data/apiservices.yaml', join(dir, 'apiservices.yaml'));
    config = await APIServiceConfig.load(join(dir, 'apiservices.yaml'), { debounceMs: 20 });
    expect(names(config.current)).toEqual(['v1.a.io']);

    const changed = next<[readonly APIService[]]>(config, 'change');
    await mkdir(join(dir, '..2026_12_01_10_05_00.2'));
    await writeFile(join(dir, '..2026_12_01_10_05_00.2', 'apiservices.yaml'), `${doc('a.io')}---\n${doc('metrics.k8s.io')}`);
    await symlink('..2026_12_01_10_05_00.2', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await rm(join(dir, '..2026_12_01_10_00_00.1'), { recursive: true });
    expect(names((await changed)[0])).toEqual(['v1.a.io', 'v1.metrics.k8s.io']);
  });

  it('notices a change through the stat poll alone when the watcher is off', async () => {
    const file = join(dir, 'apiservices.yaml');
    await writeFile(file, doc('a.io'));
    config = await APIServiceConfig.load(file, { watch: false, pollIntervalMs: 25, debounceMs: 5 });
    const changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, doc('z.io'));
    expect(names((await changed)[0])).toEqual(['v1.z.io']);
  });

  it('rejects a deleted file once, keeps the set, and recovers when it returns', async () => {
    const file = join(dir, 'apiservices.yaml');
    await writeFile(file, doc('a.io'));
    config = await APIServiceConfig.load(file, { debounceMs: 20 });
    const rejected = next<[ConfigError]>(config, 'rejected');
    await rm(file);
    expect((await rejected)[0].message).toContain('cannot read the file (ENOENT)');
    expect(names(config.current)).toEqual(['v1.a.io']);
    const changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, doc('b.io'));
    expect(names((await changed)[0])).toEqual(['v1.b.io']);
  });

  it('warns about insecureSkipTLSVerify and emits nothing for a rewrite with the same bytes', async () => {
    const file = join(dir, 'apiservices.yaml');
    const insecure = doc('a.io', ', insecureSkipTLSVerify: true');
    await writeFile(file, insecure);
    const { log, lines } = recordingLogger();
    config = await APIServiceConfig.load(file, { debounceMs: 20, logger: log });
    expect(lines).toContainEqual(['warn', "APIService v1.a.io: insecureSkipTLSVerify is set; the backend's serving certificate is not verified"]);
    const changes: Array<readonly APIService[]> = [];
    config.on('change', (s) => changes.push(s));
    await writeFile(file, insecure);
    await config.reload();
    const changed = next<[readonly APIService[]]>(config, 'change');
    await writeFile(file, doc('b.io'));
    await changed;
    expect(changes.map(names)).toEqual([['v1.b.io']]);
  });
});
