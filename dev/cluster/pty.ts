/**
 * node-pty, the dev cluster's pseudo-terminals (`exec -t`, `attach` to a tty container): an OPTIONAL
 * dependency, since only the dev cluster needs it and a production install should not need a
 * compiler for it. Loaded on first use; without it, a tty session is refused before any upgrade with
 * a Status that names the package. `KSP_DEV_CLUSTER_NO_PTY=1` makes the dev cluster behave as if it
 * were missing (tests, and anyone who wants to see that answer).
 */
import { createRequire } from 'node:module';
import { errorStatus, type V1Status } from '../../src/status.js';

/** node-pty's module. */
export type PtyModule = typeof import('node-pty');

/** The npm package a tty needs. */
export const PTY_PACKAGE = 'node-pty';

let loaded: PtyModule | null | undefined;

/** node-pty, or undefined when it is not installed (or switched off). */
export function loadPty(): PtyModule | undefined {
  if (process.env.KSP_DEV_CLUSTER_NO_PTY === '1') return undefined;
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(PTY_PACKAGE) as PtyModule;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}

/** The refusal of a tty session without node-pty. */
export function ptyMissingStatus(): V1Status {
  return errorStatus(
    500,
    `a terminal (tty) needs the optional npm package "${PTY_PACKAGE}", which is not installed here: run \`npm install ${PTY_PACKAGE}\` next to kube-stream-proxy, or exec without -t`,
    'InternalError',
  );
}
