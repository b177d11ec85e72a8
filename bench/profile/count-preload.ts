/**
 * Preload for bench/profile/count-run.ts (`node --import dist/bench/profile/count-preload.js …`):
 * counts socket pauses, resumes, 'data' reads and `_writev` calls, and GC entries by kind with
 * their durations, and on SIGTERM writes them (with the process's CPU time, and heap and
 * ArrayBuffer sizes) to `$KSP_COUNT_DIR/counts-PID.json` (default /tmp). Profiling aid only.
 */
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { observeGcByKind } from './gc-kinds.js';

const c = { pause: 0, resume: 0, reads: 0, readBytes: 0, writev: 0, gc: {} as Record<string, number>, gcMs: {} as Record<string, number> };
type Sock = net.Socket & { _writev(...a: unknown[]): unknown };
const P = net.Socket.prototype as Sock;
const { pause, resume, _writev: writev, emit } = P;
P.pause = function (this: net.Socket) {
  if (!this.isPaused()) c.pause++;
  return pause.call(this);
};
P.resume = function (this: net.Socket) {
  if (this.isPaused()) c.resume++;
  return resume.call(this);
};
P._writev = function (this: Sock, ...a: unknown[]) {
  c.writev++;
  return writev.apply(this, a);
};
P.emit = function (this: net.Socket, event: string | symbol, ...args: unknown[]) {
  if (event === 'data') {
    c.reads++;
    c.readBytes += (args[0] as Buffer).length;
  }
  return (emit as (...a: unknown[]) => boolean).call(this, event, ...args);
} as typeof P.emit;
observeGcByKind((k, ms) => {
  c.gc[k] = (c.gc[k] ?? 0) + 1;
  c.gcMs[k] = (c.gcMs[k] ?? 0) + ms;
});
process.on('SIGTERM', () => {
  const u = process.cpuUsage();
  const m = process.memoryUsage();
  const out = { ...c, cpuMs: (u.user + u.system) / 1000, heapUsedMB: m.heapUsed / 2 ** 20, arrayBuffersMB: m.arrayBuffers / 2 ** 20 };
  writeFileSync(join(process.env.KSP_COUNT_DIR ?? '/tmp', `counts-${process.pid}.json`), JSON.stringify(out));
  process.exit(0);
});
