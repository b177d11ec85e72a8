#!/usr/bin/env node
// Entry point: the compiled CLI lives in dist/ (built by `npm ci` via the prepare script).
import { heapFloorRelaunch } from '../dist/src/heap-floor.js';

// The relaying commands run with V8's heap floor (src/heap-floor.ts): where Node can replace its
// process image, become `node --initial-old-space-size=N <this script> …` before loading anything.
let relaunch;
try {
  relaunch = heapFloorRelaunch({
    argv: process.argv,
    execArgv: process.execArgv,
    execPath: process.execPath,
    env: process.env,
    canExecve: typeof process.execve === 'function',
  });
} catch (err) {
  process.stderr.write(`kube-stream-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
}
if (relaunch) process.execve(relaunch.file, relaunch.args, process.env);

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
