#!/usr/bin/env node
// Entry point: the compiled CLI lives in dist/ (built by `npm ci` via the prepare script).
import { main } from '../dist/src/cli.js';

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`kube-stream-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
