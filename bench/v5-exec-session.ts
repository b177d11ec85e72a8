/**
 * The WebSocket v5 exec clients of the tunnel load benchmark (bench/tunnel-load.ts), with kubectl's
 * framing (binary messages `[channel] + payload`; 0 stdin, 1 stdout, 3 the Status): a session that
 * waits for a start line and then reads and hashes its stdout to the end, and a session whose
 * client stops reading after its first stdout message.
 */
import { createHash } from 'node:crypto';
import WebSocket from 'ws';

/** The exec target of `argv` on the dev cluster's `demo` pod, stdout and stderr wanted (as kubectl), stdin when asked. */
export function execPath(argv: string[], stdin = false): string {
  const q = new URLSearchParams();
  for (const c of argv) q.append('command', c);
  if (stdin) q.set('stdin', 'true');
  q.set('stdout', 'true');
  q.set('stderr', 'true');
  return `/api/v1/namespaces/default/pods/demo/exec?${q.toString()}`;
}

/** One finished session. */
export interface SessionResult {
  bytes: number;
  sha256: string;
  /** The v5 error channel's Status text. */
  status: string;
  closeCode: number;
}

/** A session opened and waiting for its start line. */
export interface OpenSession {
  /** Send the start line: the pod's shell stops waiting and `cat`s the file. */
  go(): void;
  /** Settles once stdout ended and the WebSocket closed. */
  done: Promise<SessionResult>;
}

/**
 * The pod side of a load session: wait for one line on stdin, then write the file to stdout. The
 * wait lets every session open before any moves data, so the measured time is the data phase.
 */
export function gatedCatArgv(file: string): string[] {
  return ['sh', '-c', 'read go && exec cat "$0"', file];
}

/**
 * Open a v5 exec (stdin too) at `url`; resolves once the exec runs (its shell waits for the start
 * line); `done` reads stdout to its end, hashing it.
 */
export function openSession(url: URL, timeoutMs: number): Promise<OpenSession> {
  return new Promise((resolveOpen, rejectOpen) => {
    let opened = false;
    const done = runSession(url, timeoutMs, (ws) => {
      opened = true;
      resolveOpen({ go: () => ws.send(Buffer.from('\0go\n', 'latin1'), { binary: true }), done });
    });
    done.catch((err: unknown) => {
      if (!opened) rejectOpen(err);
    });
  });
}

/** Run a v5 exec at `url` and read stdout to its end, hashing it; `onOpen` once the exec runs. */
function runSession(url: URL, timeoutMs: number, onOpen: (ws: WebSocket) => void): Promise<SessionResult> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    ws.once('open', () => onOpen(ws));
    const hash = createHash('sha256');
    let bytes = 0;
    let status = '';
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`session timed out after ${timeoutMs} ms with ${bytes} bytes of stdout`));
    }, timeoutMs);
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data.length === 0) return;
      if (data[0] === 1) {
        bytes += data.length - 1;
        hash.update(data.subarray(1));
      } else if (data[0] === 3) status += data.subarray(1).toString('utf8');
    });
    ws.once('close', (code) => {
      clearTimeout(timer);
      resolve({ bytes, sha256: hash.digest('hex'), status, closeCode: code });
    });
  });
}

/** A session whose client stops reading after its first stdout message. */
export interface StalledSession {
  /** stdout bytes the client took before it stopped. */
  received: number;
  /** True while its WebSocket is open. */
  open(): boolean;
  close(): void;
}

/** Open the stalled session; resolves once it has stopped reading. */
export function openStalledSession(url: URL, timeoutMs: number): Promise<StalledSession> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let received = 0;
    let stalled = false;
    ws.on('error', (err) => {
      if (!stalled) reject(err);
    });
    ws.once('close', (code) => {
      if (!stalled) reject(new Error(`stalled session closed (${code}) before its first stdout`));
    });
    ws.on('message', (raw: WebSocket.RawData, isBinary: boolean) => {
      const data = raw as Buffer;
      if (!isBinary || data[0] !== 1 || data.length === 1) return;
      received += data.length - 1;
      if (stalled) return;
      stalled = true;
      // No more reads from the socket: backpressure to the proxy, the tunnel stream and the pod.
      ws.pause();
      resolve({
        get received() {
          return received;
        },
        open: () => ws.readyState === WebSocket.OPEN,
        close: () => ws.terminate(),
      });
    });
  });
}
