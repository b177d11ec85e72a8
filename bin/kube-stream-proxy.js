#!/usr/bin/env node
// Entry point: the compiled CLI lives in dist/ (built by `npm ci` via the prepare script).
import { HEAP_FLOOR_VIA_ENV, heapFloorRelaunch, heapFloorStatus, recordHeapFloor } from '../dist/src/heap-floor.js';

// The relaying commands run with V8's heap floor (src/heap-floor.ts), before anything is loaded:
// where Node can replace its process image, become `node --initial-old-space-size=N <this script> …`;
// elsewhere start that as one child process and stand in for it (src/heap-floor-child.ts).
let relaunch;
try {
  relaunch = heapFloorRelaunch({
    argv: process.argv,
    execArgv: process.execArgv,
    execPath: process.execPath,
    env: process.env,
    canExecve: typeof process.execve === 'function',
    pid: process.pid,
  });
} catch (err) {
  process.stderr.write(`kube-stream-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
}
if (relaunch?.how === 'execve') process.execve(relaunch.file, relaunch.args, relaunch.env);
if (relaunch?.how === 'child-process') {
  const { runHeapFloorParent } = await import('../dist/src/heap-floor-child.js');
  runHeapFloorParent(relaunch);
} else {
  const floor = heapFloorStatus({ argv: process.argv, execArgv: process.execArgv, env: process.env, pid: process.pid, ppid: process.ppid });
  const startedAsChild = process.env[HEAP_FLOOR_VIA_ENV]?.startsWith('child-process:') === true;
  delete process.env[HEAP_FLOOR_VIA_ENV];
  recordHeapFloor(floor);
  if (floor.via === 'child-process') (await import('../dist/src/heap-floor-child.js')).watchHeapFloorParent();
  else if (startedAsChild) {
    // Started as the heap floor's child, but another process is the parent now: it is gone already.
    process.stderr.write('kube-stream-proxy: the process that started this one with the heap floor is gone; exiting\n');
    process.exit(1);
  }
  const { main } = await import('../dist/src/cli.js');
  main(process.argv.slice(2)).then(
    (code) => {
      if (typeof code === 'number') process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`kube-stream-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
