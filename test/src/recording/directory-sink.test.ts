/**
 * The directory sink and the store that reads it: modes (directory 0700, files 0600), the cast on
 * disk while the session runs (readable long before the end), the sidecar with size and sha256,
 * tampering found by `sessions verify` (exit 1), `sessions list` as a table, and a disk that fails
 * (a write error reaches the recording as a sink error).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { DirectorySink } from '../../../src/recording/directory-sink.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { RecordingStore } from '../../../src/recording/recording-store.js';
import { formatSessionTable } from '../../../src/recording/sessions-command.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId } from '../../../src/recording/sink.js';
import { CastFileWriter } from '../../../src/recording/cast-file.js';

const execFileP = promisify(execFile);
const CLI = join(resolve(import.meta.dirname, '../../..'), 'bin/kube-stream-proxy.js');

let work: string | undefined;
afterEach(() => {
  if (work) rmSync(work, { recursive: true, force: true });
  work = undefined;
});

async function recordTo(sink: DirectorySink, enforce = false): Promise<SessionRecording> {
  const id = newRecordingId();
  return new SessionRecording({
    identity: { sessionId: id, user: 'alice', groups: ['sre'], namespace: 'default', pod: 'demo', container: 'main', subresource: 'exec', command: ['sh', '-c', 'ls'], tty: false, record: 'output' },
    enforce,
    upload: await sink.open(id),
    sink: 'directory',
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
}

describe('DirectorySink', () => {
  it('0700 directory, 0600 files; the cast is on disk while the session runs; sidecar with sha256; verify', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-dir-'));
    const dir = join(work, 'recordings');
    mkdirSync(dir, { mode: 0o755 });
    const sink = new DirectorySink(dir);
    await sink.prepare();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const rec = await recordTo(sink);
    rec.output('stdout', Buffer.from('running output\n'));
    const cast = join(dir, `${rec.id}.cast`);
    // Handed to the kernel at once: another reader sees it before the session ends.
    const deadline = Date.now() + 1000;
    while (!readFileSync(cast, 'utf8').includes('running output') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(readFileSync(cast, 'utf8')).toContain('running output');
    expect(statSync(cast).mode & 0o777).toBe(0o600);
    const store = new RecordingStore(dir);
    expect((await store.get(rec.id))?.state).toBe('open');
    rec.exit({ exitCode: 0 });
    const s = await rec.finish();
    const sidecar = JSON.parse(readFileSync(join(dir, `${rec.id}.json`), 'utf8'));
    expect(sidecar).toMatchObject({ id: rec.id, user: 'alice', namespace: 'default', pod: 'demo', container: 'main', command: ['sh', '-c', 'ls'], exitCode: 0, result: 'complete', castBytes: statSync(cast).size });
    expect(sidecar.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(join(dir, `${rec.id}.json`)).mode & 0o777).toBe(0o600);
    expect(s.result).toBe('complete');
    expect(await store.verify(rec.id)).toMatchObject({ ok: true });
    const table = formatSessionTable(await store.list());
    expect(table.split('\n')[1]).toMatch(new RegExp(`^${rec.id}\\s+alice\\s+-/default/demo/main\\s+sh -c ls\\s+\\S+Z\\s+[\\d.]+s\\s+0\\s+\\S+B\\s+complete$`));
    // The CLI (built) finds it, and finds the change once the file is altered.
    const ok = await execFileP(process.execPath, [CLI, 'sessions', 'verify', '--dir', dir]);
    expect(ok.stdout).toBe(`OK      ${rec.id}  sha256 matches\n`);
    appendFileSync(cast, '[9.0, "o", "forged"]\n');
    const bad = await execFileP(process.execPath, [CLI, 'sessions', 'verify', rec.id, '--dir', dir]).catch((e: { code: number; stdout: string }) => e);
    expect((bad as { code: number }).code).toBe(1);
    expect((bad as { stdout: string }).stdout).toMatch(new RegExp(`^FAILED  ${rec.id}  MODIFIED: sha256 [0-9a-f]{64} \\(\\d+ bytes\\), the index says ${sidecar.sha256}`));
    const listed = await execFileP(process.execPath, [CLI, 'sessions', 'list', '--dir', dir, '--user', 'alice', '-o', 'json']);
    expect(JSON.parse(listed.stdout.trim()).id).toBe(rec.id);
    const none = await execFileP(process.execPath, [CLI, 'sessions', 'list', '--dir', dir, '--user', 'bob']);
    expect(none.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('a full disk: the write error reaches the writer once (ENOSPC), later writes are dropped', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-dir-'));
    const id = newRecordingId();
    // /dev/full answers every write with ENOSPC, as a full filesystem does.
    symlinkSync('/dev/full', join(work, `${id}.cast`));
    const writer = await CastFileWriter.resume(work, id, 0);
    const errors: string[] = [];
    writer.onError((e) => errors.push((e as NodeJS.ErrnoException).code ?? e.message));
    writer.write('[0.1, "o", "x"]\n');
    const deadline = Date.now() + 2000;
    while (errors.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(errors).toEqual(['ENOSPC']);
    writer.write('more');
    expect(writer.pendingBytes).toBe(0);
    await expect(writer.close()).rejects.toMatchObject({ code: 'ENOSPC' });
  });

  it('a directory the proxy cannot write: the health check and open fail (enforce refuses the session before the upgrade)', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-dir-'));
    const dir = join(work, 'ro');
    mkdirSync(dir, { mode: 0o700 });
    chmodSync(dir, 0o500);
    if (process.getuid?.() === 0) {
      // root writes anyway; a file in place of the directory fails for everyone.
      rmSync(dir, { recursive: true, force: true });
      appendFileSync(dir, 'not a directory');
    }
    await expect(new DirectorySink(dir).check()).rejects.toThrow();
    await expect(new DirectorySink(dir).open(newRecordingId())).rejects.toThrow();
  });

  it('the health check creates the directory (0700) and nothing in it', async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-dir-'));
    const dir = join(work, 'recordings');
    await new DirectorySink(dir).check();
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir)).toEqual([]);
  });
});
