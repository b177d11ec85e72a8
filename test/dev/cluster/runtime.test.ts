import { EventEmitter } from 'node:events';
import { PassThrough, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevCluster, type DevCluster } from '../../../dev/cluster/dev-cluster.js';
import { runAttach, runExec } from '../../../dev/cluster/runtime.js';
import { ContainerProcess } from '../../../dev/cluster/container-process.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let cluster: DevCluster;
beforeAll(async () => {
  cluster = await startDevCluster({ pods: ['rt'] });
});
afterAll(async () => {
  await cluster.close();
});

const pod = () => cluster.pods.get('default', 'rt')!;
const req = (command: string[]) => ({ pod: pod(), container: 'rt', command });

function collector(opts: { keep?: boolean; onWrite?: () => void } = {}) {
  const chunks: Buffer[] = [];
  let bytes = 0;
  const w = new Writable({
    write(c: Buffer, _e, cb) {
      if (opts.keep !== false) chunks.push(c);
      bytes += c.length;
      opts.onWrite?.();
      cb();
    },
  });
  return { w, text: () => Buffer.concat(chunks).toString(), size: () => bytes };
}

describe('runExec', () => {
  it('returns the exit code and separates stdout and stderr', async () => {
    const out = collector();
    const err = collector();
    const r = await runExec(req(['sh', '-c', 'echo a; echo b >&2; exit 42']), { stdout: out.w, stderr: err.w, tty: false }, new AbortController().signal);
    expect(r).toEqual({ exitCode: 42 });
    expect([out.text(), err.text()]).toEqual(['a\n', 'b\n']);
    expect(out.w.writableEnded).toBe(false);
  });

  it('rejects when the executable is missing', async () => {
    await expect(runExec(req(['/no/such/bin']), { tty: false }, new AbortController().signal)).rejects.toThrow(/no\/such\/bin/);
  });

  it('ends the process stdin on stdin EOF', async () => {
    const stdin = new PassThrough();
    const out = collector();
    const done = runExec(req(['wc', '-c']), { stdin, stdout: out.w, tty: false }, new AbortController().signal);
    stdin.end(Buffer.alloc(12345));
    expect(await done).toEqual({ exitCode: 0 });
    expect(out.text().trim()).toBe('12345');
  });

  it('kills the process group when aborted', async () => {
    const abort = new AbortController();
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    const out = collector({ onWrite: () => started() });
    const done = runExec(req(['sh', '-c', 'echo started; sleep 60']), { stdout: out.w, tty: false }, abort.signal);
    await startedP;
    abort.abort();
    const r = await done;
    expect(r.exitCode).toBe(128 + 15);
  });

  it('holds the process while stdout is full, without buffering everything', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let blocked!: () => void;
    const blockedP = new Promise<void>((r) => (blocked = r));
    let received = 0;
    const slow = new Writable({
      highWaterMark: 64 * 1024,
      write(c: Buffer, _e, cb) {
        received += c.length;
        if (received > 1024 * 1024) {
          blocked();
          void gate.then(() => cb());
        } else cb();
      },
    });
    const total = 32 * 1024 * 1024;
    const done = runExec(req(['head', '-c', String(total), '/dev/zero']), { stdout: slow, tty: false }, new AbortController().signal);
    await blockedP;
    // let the pipe fill: if nothing paused the process, more data would queue up meanwhile
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    // the writer is stuck; the process must not have pushed everything into memory
    expect(slow.writableLength).toBeLessThan(1024 * 1024);
    release();
    expect(await done).toEqual({ exitCode: 0 });
    expect(received).toBe(total);
  });

  it('moves 128 MiB byte-exact (speed is measured by npm run bench, not here)', async () => {
    const out = collector({ keep: false });
    const total = 128 * 1024 * 1024;
    const r = await runExec(req(['head', '-c', String(total), '/dev/zero']), { stdout: out.w, tty: false }, new AbortController().signal);
    expect(r.exitCode).toBe(0);
    expect(out.size()).toBe(total);
  });

  // Exec'd processes are started by the spawn helper (process-spawner.ts), never forked from the
  // dev cluster's own (large) process: every fork write-protects the parent's memory, and the
  // copy-on-write faults that follow were what made `cat` echo slow under load.
  describe('processes started by the spawn helper', () => {
    it('are not children of the dev cluster process', async () => {
      const out = collector();
      const r = await runExec(req(['sh', '-c', 'echo $PPID']), { stdout: out.w, tty: false }, new AbortController().signal);
      expect(r.exitCode).toBe(0);
      const ppid = Number(out.text().trim());
      expect(ppid).toBeGreaterThan(1);
      expect(ppid).not.toBe(process.pid);
    });

    it('lose no output written before the pipes are handed over (40 at once, stdout and stderr exact)', async () => {
      // The helper must never read a process's output itself: these write at once and exit.
      const runs = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const out = collector();
          const err = collector();
          const r = await runExec(
            req(['sh', '-c', `seq 1 ${2000 + i}; echo err-${i} >&2; exit ${i % 7}`]),
            { stdout: out.w, stderr: err.w, tty: false },
            new AbortController().signal,
          );
          return { i, r, out: out.text(), err: err.text() };
        }),
      );
      for (const { i, r, out, err } of runs) {
        expect(r.exitCode).toBe(i % 7);
        expect(out).toBe(Array.from({ length: 2000 + i }, (_, k) => `${k + 1}\n`).join(''));
        expect(err).toBe(`err-${i}\n`);
      }
    });

    it('get stdin written before they run, in order, then EOF (4 MiB through cat, sha256)', async () => {
      const { createHash } = await import('node:crypto');
      const stdin = new PassThrough();
      const inHash = createHash('sha256');
      const outHash = createHash('sha256');
      let outBytes = 0;
      const out = new Writable({
        write(c: Buffer, _e, cb) {
          outHash.update(c);
          outBytes += c.length;
          cb();
        },
      });
      const done = runExec(req(['cat']), { stdin, stdout: out, tty: false }, new AbortController().signal);
      // Written synchronously, before the helper can have handed the pipes over: held, in order.
      let total = 0;
      for (let k = 0; k < 64; k++) {
        const chunk = Buffer.alloc(64 * 1024, k);
        chunk.writeUInt32BE(k, 0);
        inHash.update(chunk);
        total += chunk.length;
        stdin.write(chunk);
      }
      stdin.end();
      expect(await done).toEqual({ exitCode: 0 });
      expect(outBytes).toBe(total);
      expect(outHash.digest('hex')).toBe(inHash.digest('hex'));
    });

    it('are killed by an abort that comes before they run', async () => {
      const abort = new AbortController();
      const done = runExec(req(['sleep', '60']), { tty: false }, abort.signal);
      abort.abort();
      expect(await done).toEqual({ exitCode: 128 + 15 });
    });

    it('report a command the OS refuses to start as a rejection', async () => {
      // A directory passes the executable lookup (X_OK) but execve refuses it (EACCES).
      const { mkdtempSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { tmpdir } = await import('node:os');
      const bad = mkdtempSync(join(tmpdir(), 'ksp-rt-'));
      await expect(runExec(req([bad]), { tty: false }, new AbortController().signal)).rejects.toThrow(/EACCES/);
    });
  });

  it('runs on a pty with the first resize and later resizes', async () => {
    const resize = new EventEmitter();
    const stdin = new PassThrough();
    const out = collector();
    const done = runExec(req(['sh']), { stdin, stdout: out.w, tty: true, resize }, new AbortController().signal);
    resize.emit('resize', { width: 91, height: 33 });
    stdin.write('stty size; exit 9\n');
    expect(await done).toEqual({ exitCode: 9 });
    expect(out.text()).toContain('33 91');
  });
});

describe('runAttach', () => {
  it('broadcasts to every attacher and resolves when the main process exits', async () => {
    const a = collector();
    const b = collector();
    const stdin = new PassThrough();
    const ctl = new AbortController();
    const first = runAttach(req([]), { stdin, stdout: a.w, tty: false }, ctl.signal);
    const second = runAttach(req([]), { stdout: b.w, tty: false }, ctl.signal);
    stdin.end('echo both; exit 3\n'); // stdin EOF of an attacher does not close the main stdin
    expect(await first).toEqual({ exitCode: 3 });
    expect(await second).toEqual({ exitCode: 3 });
    expect([a.text(), b.text()]).toEqual(['both\n', 'both\n']);
  });

  it('resolves when aborted and leaves the main process running', async () => {
    const main = pod().mains.get('rt')!;
    if (main.pid === undefined) await new Promise((r) => main.once('restart', r));
    const pid = main.pid;
    const ctl = new AbortController();
    const done = runAttach(req([]), { stdout: collector().w, tty: false }, ctl.signal);
    ctl.abort();
    expect(await done).toEqual({ exitCode: 0 });
    expect(main.pid).toBe(pid);
  });

  it('arriving during the restart back-off, attaches to the restarted process (stdin kept for it)', async () => {
    const main = pod().mains.get('rt')!;
    if (!main.running) await new Promise((r) => main.once('restart', r));
    // A main process that lives < 1 s is restarted after a back-off: the window of the old hang.
    const quick = new PassThrough();
    const first = runAttach(req([]), { stdin: quick, stdout: collector().w, tty: false }, new AbortController().signal);
    quick.end('exit 0\n');
    expect(await first).toEqual({ exitCode: 0 });
    expect(main.running).toBe(false);
    const before = main.restartCount;
    const out = collector();
    const stdin = new PassThrough();
    const second = runAttach(req([]), { stdin, stdout: out.w, tty: false }, new AbortController().signal);
    stdin.end('echo again; exit 5\n');
    expect(await second).toEqual({ exitCode: 5 });
    expect(out.text()).toBe('again\n');
    expect(main.restartCount).toBe(before + 1);
  });
});

describe('ContainerProcess.attach', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'ksp-container-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const spec = (command?: string[]) => ({ name: 'c', image: 'busybox', stdin: true, stdinOnce: false, tty: false, command });

  it('rejects once the container was stopped, instead of waiting', async () => {
    const main = new ContainerProcess(spec(), { podName: 'p', workDir: dir });
    main.start();
    await main.stop();
    await expect(main.attach({}, new AbortController().signal)).rejects.toThrow('container "c" is not running');
  });

  it('rejects when the restart cannot start a process (missing executable)', async () => {
    const main = new ContainerProcess(spec(['/no/such/bin']), { podName: 'p', workDir: dir });
    main.start();
    try {
      await expect(main.attach({}, new AbortController().signal)).rejects.toThrow(/could not start.*no\/such\/bin/);
    } finally {
      await main.stop();
    }
  });

  it('a waiting attacher is released by its own abort', async () => {
    const main = new ContainerProcess(spec(['/no/such/bin']), { podName: 'p', workDir: dir });
    main.start();
    const ctl = new AbortController();
    const waiting = main.attach({}, ctl.signal);
    ctl.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    await main.stop();
  });
});
