/** What the latency benchmark needs from an exec session running `cat`. */
export interface EchoSession {
  /** Write `data` to the command's stdin. */
  send(data: Buffer): void;
  /** Resolves once `bytes` more bytes of stdout have arrived (counted from the previous expect). */
  expect(bytes: number): Promise<void>;
  /** Close stdin and wait for the session to end (forcibly after a few seconds). */
  close(): Promise<void>;
}

/** Counts stdout bytes and wakes the one waiter once its byte count is reached. */
export class EchoReader {
  private received = 0;
  private waiting: { until: number; resolve(): void; reject(e: Error): void } | undefined;
  private target = 0;
  private failed: Error | undefined;

  /** The stream ended: a pending or later expect() rejects with `err`. */
  fail(err: Error): void {
    this.failed ??= err;
    const w = this.waiting;
    this.waiting = undefined;
    w?.reject(err);
  }

  push(n: number): void {
    this.received += n;
    const w = this.waiting;
    if (w && this.received >= w.until) {
      this.waiting = undefined;
      w.resolve();
    }
  }

  expect(bytes: number): Promise<void> {
    this.target += bytes;
    if (this.received >= this.target) return Promise.resolve();
    if (this.failed) return Promise.reject(this.failed);
    const until = this.target;
    return new Promise((resolve, reject) => (this.waiting = { until, resolve, reject }));
  }
}
