/**
 * What a long-running command does on SIGTERM and SIGINT (`serve`, `dev-cluster`, `demo`).
 */

/**
 * SIGTERM/SIGINT run `close` (the graceful shutdown) and exit 0 when it is done; a second signal
 * exits 1 at once, for an operator who does not want to wait.
 */
export function installShutdown(close: () => Promise<void>): void {
  let closing = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (closing) {
      process.stderr.write(`kube-stream-proxy: ${signal} again, exiting without waiting\n`);
      process.exit(1);
    }
    closing = true;
    process.stderr.write(`kube-stream-proxy: ${signal}, shutting down\n`);
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
