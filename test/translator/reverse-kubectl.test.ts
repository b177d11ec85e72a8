/**
 * What the SPDY acceptance matrix (reverse-kubectl-matrix.test.ts) does not show, with real SPDY-only
 * kubectl (1.27, 1.29, and 1.33 with the WebSocket toggles false) → the harness (ReverseStreamTranslatorProxy,
 * ReverseStreamTunnelProxy) → a gateway that refuses every SPDY upgrade with 403 and speaks only
 * WebSocket v5 and the port-forward tunnel → the real dev cluster: both directions at once (exec -i
 * cat, port-forward through an echo server), what reaches the gateway (GET WebSocket upgrades only,
 * nothing past their heads) and what the translator counts; the gateway refusing the WebSocket too;
 * a slow reader getting every byte of an upstream that has finished.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server } from 'node:net';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { finished } from 'node:stream/promises';
import { sha256 } from '../helpers/hash.js';
import { downloadDigest, startBytesServer, type BytesServer } from '../helpers/http-fixture.js';
import { findKubectl, kubectlEnv, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { deterministicBytes, repeatedPatternDigest } from '../helpers/random-data.js';
import { REVERSE_CLIENTS, startReverseFixture, type ReverseFixture } from './reverse-fixture.js';

const MB = 1_000_000;
const STDIN_BYTES = 10 * MB;
const PF_BYTES = 4 * MB;
const SLOW_BYTES = 50 * MB;

let fx: ReverseFixture;
let bytes: BytesServer;
let echo: Server;
let echoPort: number;
let stdinData: Buffer;

beforeAll(async () => {
  fx = await startReverseFixture();
  bytes = await startBytesServer();
  // Port-forward's both ways: whatever arrives is sent back.
  echo = createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  echo.listen(0, '127.0.0.1');
  await once(echo, 'listening');
  echoPort = (echo.address() as AddressInfo).port;
  stdinData = deterministicBytes(50, STDIN_BYTES);
});

afterAll(async () => {
  await fx?.close();
  await bytes?.close();
  await new Promise((r) => echo?.close(r));
});

/**
 * Run `body`; then the translator must have counted `sessions` more sessions, all 200, and every
 * upgrade the gateway saw meanwhile must be a WebSocket GET offering v5 then v4, nothing past its head.
 */
async function reverseTranslated<T>(sessions: number, body: () => Promise<T>): Promise<T> {
  const codes = fx.counter.codes.length;
  const upgrades = fx.gateway.upgrades.length;
  const result = await body();
  // The last session's count lands when the harness has closed it (kubectl may exit first).
  await Promise.all(fx.record.translated);
  expect(fx.counter.codes.slice(codes)).toEqual(Array.from({ length: sessions }, () => 200));
  expect(fx.gateway.upgrades.slice(upgrades)).toEqual(
    Array.from({ length: sessions }, () => expect.objectContaining({ method: 'GET', upgrade: 'websocket', webSocketProtocol: 'v5.channel.k8s.io, v4.channel.k8s.io', streamProtocolVersion: undefined })),
  );
  expect(fx.gateway.earlyBytes.slice(upgrades)).toEqual(Array.from({ length: sessions }, () => 0));
  return result;
}

describe.each(REVERSE_CLIENTS)('$name → reverse translator → WebSocket-only gateway → dev cluster', (client) => {
  let bin: string;
  beforeAll(() => {
    bin = findKubectl(client.version);
  });

  it(`exec -i cat: ${STDIN_BYTES / MB} MB in and the same back at once (sha256 both ways), the exit code and its message`, async () => {
    const r = await reverseTranslated(1, () => runKubectl(bin, ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; exit 5'], { kubeconfig: fx.kubeconfig, env: client.env, stdin: stdinData, hashStdout: true, timeoutMs: 60_000 }));
    expect(r.code, summary(r)).toBe(5);
    expect(r.stdoutDigest).toEqual({ sha256: sha256(stdinData), byteLength: STDIN_BYTES });
    expect(r.stderr).toContain('command terminated with exit code 5');
  });

  it(`port-forward through the WebSocket tunnel: ${PF_BYTES / MB} MB down, ${PF_BYTES / MB} MB echoed both ways at once`, async () => {
    const tunnels = fx.record.tunnels.length;
    const upgrades = fx.gateway.upgrades.length;
    const pf = startKubectl(bin, ['port-forward', 'pod/demo', `:${bytes.port}`, `:${echoPort}`], { kubeconfig: fx.kubeconfig, env: client.env, cwd: fx.work });
    let exit: Awaited<ReturnType<typeof pf.stop>>;
    try {
      const down = Number((await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${bytes.port}\\b`), 30_000))[1]);
      const both = Number((await pf.waitForOutput(new RegExp(`Forwarding from 127\\.0\\.0\\.1:(\\d+) -> ${echoPort}\\b`), 30_000))[1]);
      const d = await downloadDigest(`http://127.0.0.1:${down}/bytes/${PF_BYTES}?seed=52`);
      expect({ sha256: d.sha256, byteLength: d.byteLength }).toEqual(bytes.expected(PF_BYTES, 52));
      const sent = deterministicBytes(53, PF_BYTES);
      expect(await echoDigest(both, sent)).toEqual({ sha256: sha256(sent), byteLength: PF_BYTES });
    } finally {
      exit = await pf.stop('SIGINT', 10_000);
    }
    expect(exit, `${pf.command}\n${JSON.stringify(pf.output())}`).toEqual({ code: 0, signal: null, killed: false });
    expect(fx.record.tunnels.length).toBe(tunnels + 1);
    const outcome = await fx.record.tunnels[tunnels]!;
    expect(outcome.kind).toBe('tunneled');
    if (outcome.kind === 'tunneled') expect(outcome.relay.bytes.toClient).toBeGreaterThanOrEqual(2 * PF_BYTES);
    const seen = fx.gateway.upgrades.slice(upgrades);
    expect(seen.map((u) => [u.method, u.upgrade, u.webSocketProtocol, u.streamProtocolVersion])).toEqual([['GET', 'websocket', 'SPDY/3.1+portforward.k8s.io', undefined]]);
    expect(fx.gateway.earlyBytes.slice(upgrades)).toEqual([0]);
  });
});

/** Send `data` to the echo server on `port` while reading what comes back; the digest of what came back. */
async function echoDigest(port: number, data: Buffer): Promise<{ sha256: string; byteLength: number }> {
  const socket = connect({ host: '127.0.0.1', port });
  const hash = createHash('sha256');
  let received = 0;
  await once(socket, 'connect');
  const done = new Promise<void>((resolve, reject) => {
    socket.on('data', (c: Buffer) => {
      hash.update(c);
      received += c.length;
      if (received >= data.length) resolve();
    });
    socket.on('error', reject);
    socket.on('close', () => (received >= data.length ? resolve() : reject(new Error(`echo closed after ${received} bytes`))));
  });
  socket.write(data);
  await done;
  socket.destroy();
  return { sha256: hash.digest('hex'), byteLength: received };
}

describe('the gateway', () => {
  it('refuses SPDY itself: kubectl 1.29 straight to it fails with its 403 (so every pass above was translated)', async () => {
    const direct = join(fx.work, 'kubeconfig-gateway');
    writeKubeconfig(direct, { server: fx.gateway.url, name: 'gateway' });
    const r = await runKubectl(findKubectl('1.29'), ['exec', 'demo', '--', 'echo', 'never'], { kubeconfig: direct, timeoutMs: 30_000 });
    expect(r.code, summary(r)).toBe(1);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toContain('this gateway does not speak SPDY/3.1; use WebSockets');
    expect(fx.gateway.upgrades.at(-1)).toMatchObject({ method: 'POST', upgrade: 'SPDY/3.1' });
  });
});

describe('the upstream refuses the WebSocket too', () => {
  it('its answer (403 Status) reaches the SPDY client verbatim, nothing is upgraded', async () => {
    fx.gateway.mode = { kind: 'refuse', code: 403, message: 'websockets are refused here too' };
    try {
      const codes = fx.counter.codes.length;
      const r = await runKubectl(findKubectl('1.29'), ['exec', 'demo', '--', 'echo', 'never'], { kubeconfig: fx.kubeconfig, timeoutMs: 30_000 });
      expect(r.code, summary(r)).toBe(1);
      expect(r.stdout.length).toBe(0);
      expect(r.stderr).toContain('websockets are refused here too');
      await Promise.all(fx.record.translated);
      expect(fx.counter.codes.slice(codes)).toEqual([403]);
      expect(await fx.record.translated[fx.record.translated.length - 1]).toEqual({ kind: 'refused', statusCode: 403 });
    } finally {
      fx.gateway.mode = { kind: 'serve' };
    }
  });
});

describe('never truncate: a slow reader', () => {
  it(`gets all ${SLOW_BYTES / MB} MB an upstream wrote before it exited`, async () => {
    const sessions = fx.gateway.sessions.length;
    const child = spawn(findKubectl('1.29'), ['--kubeconfig', fx.kubeconfig, 'exec', 'demo', '--', 'sh', '-c', `yes abcdefghij | head -c ${SLOW_BYTES}`], {
      env: kubectlEnv(fx.kubeconfig),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    const hash = createHash('sha256');
    let read = 0;
    // kubectl's stdout is read at about 10 MB/s, far slower than the command writes.
    const reader = new Writable({
      write(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        read += chunk.length;
        setTimeout(done, chunk.length / 10_000);
      },
    });
    child.stdout.pipe(reader);
    // The upstream's session (the gateway's) is over once it has sent everything, its Status and its close.
    while (fx.gateway.sessions.length === sessions) await new Promise((r) => setTimeout(r, 10));
    await fx.gateway.sessions[sessions];
    const readWhenUpstreamDone = read;
    await finished(reader);
    expect({ code: await exited, stderr }).toEqual({ code: 0, stderr: '' });
    expect(readWhenUpstreamDone).toBeLessThan(SLOW_BYTES);
    expect({ sha256: hash.digest('hex'), byteLength: read }).toEqual(repeatedPatternDigest('abcdefghij\n', SLOW_BYTES));
    const result = await fx.record.translated[fx.record.translated.length - 1];
    expect(result).toMatchObject({ code: 200, bytes: { toClient: SLOW_BYTES } });
  });
});
