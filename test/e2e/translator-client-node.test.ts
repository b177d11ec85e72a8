/**
 * @kubernetes/client-node 1.4 (`Exec`, `Attach`, `Cp`) through the proxy. It offers
 * `v5.channel.k8s.io` first, so the translator serves it (the fixture's proxy runs with
 * `--upstream-streaming spdy`: the dev cluster behind would take v5 itself). With v5
 * client-node closes stdin with `[255, 0]` when its stdin stream ends, which the translator turns into
 * a SPDY FIN — so `cat` ends and the Status arrives.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { PassThrough, Writable } from 'node:stream';
import { Attach, Cp, Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import type { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256 } from '../helpers/hash.js';
import { deterministicBytes } from '../helpers/random-data.js';
import { startTranslatorFixture, type TranslatorFixture } from '../translator/translator-fixture.js';

let fx: TranslatorFixture;
let kc: KubeConfig;

beforeAll(async () => {
  fx = await startTranslatorFixture();
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'proxy', server: fx.proxy.url, skipTLSVerify: true }],
    users: [{ name: 'proxy' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy' }],
    currentContext: 'proxy',
  });
});

afterAll(async () => {
  await fx?.close();
});

function sink() {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(c: Buffer, _e, cb) {
      chunks.push(Buffer.from(c));
      cb();
    },
  });
  return { w, bytes: () => Buffer.concat(chunks), text: () => Buffer.concat(chunks).toString() };
}

/** Wait for the socket's close; returns the close code. */
function closed(ws: WebSocket): Promise<number> {
  return new Promise((resolve) => {
    if (ws.readyState === ws.CLOSED) resolve(1006);
    ws.once('close', (code: number) => resolve(code));
  });
}

describe('client-node Exec over v5 through the translator', () => {
  it('cat with stdin that ends: output equals input, status Success', async () => {
    const input = deterministicBytes(51, 3_000_000);
    const before = await fx.translated(200);
    const out = sink();
    const err = sink();
    const stdin = new PassThrough();
    let status: V1Status | undefined;
    const ws = (await new Exec(kc).exec('default', 'demo', 'demo', ['cat'], out.w, err.w, stdin, false, (s) => (status = s))) as unknown as WebSocket;
    expect(ws.protocol).toBe('v5.channel.k8s.io');
    const done = closed(ws);
    stdin.end(input);
    expect(await done).toBe(1000);
    expect(sha256(out.bytes())).toBe(sha256(input));
    expect(out.bytes().length).toBe(input.length);
    expect(status).toEqual({ metadata: {}, status: 'Success' });
    expect(await fx.translated(200)).toBe(before + 1);
  });

  it('a non-zero exit arrives as NonZeroExitCode with the ExitCode cause', async () => {
    const out = sink();
    let status: V1Status | undefined;
    const ws = (await new Exec(kc).exec('default', 'demo', 'demo', ['sh', '-c', 'echo x; exit 3'], out.w, null, null, false, (s) => (status = s))) as unknown as WebSocket;
    await closed(ws);
    expect(out.text()).toBe('x\n');
    expect(status?.status).toBe('Failure');
    expect(status?.reason).toBe('NonZeroExitCode');
    expect(status?.details?.causes).toEqual([{ reason: 'ExitCode', message: '3' }]);
  });
});

describe('client-node Attach over v5 through the translator', () => {
  it('drives the main shell and ends when its stdin ends', async () => {
    const before = await fx.translated(200);
    const out = sink();
    const stdin = new PassThrough();
    const ws = (await new Attach(kc).attach('default', 'demo', 'demo', out.w, null, stdin, false)) as unknown as WebSocket;
    expect(ws.protocol).toBe('v5.channel.k8s.io');
    const done = closed(ws);
    stdin.end('echo attached-ok\nexit 0\n');
    expect(await done).toBe(1000);
    expect(out.text()).toContain('attached-ok');
    expect(await fx.translated(200)).toBe(before + 1);
  });
});

describe('client-node Cp over v5 through the translator', () => {
  /**
   * An Exec that remembers each session's socket, so the test can wait for Cp (which does not wait
   * itself). With `gunzipStdout`, stdout goes through gunzip first: client-node 1.4's `cpFromPod` runs
   * `tar zcf -` but feeds the bytes to `tar-fs` extract without decompressing ("Invalid tar header"
   * against any server, kube-apiserver included), so the test adds the missing step.
   */
  function trackingExec(gunzipStdout = false) {
    const exec = new Exec(kc);
    const sockets: Promise<WebSocket>[] = [];
    const extracted: Promise<unknown>[] = [];
    const original = exec.exec.bind(exec);
    exec.exec = ((...args: Parameters<Exec['exec']>) => {
      const stdout = args[4];
      if (gunzipStdout && stdout) {
        const gunzip = createGunzip();
        gunzip.pipe(stdout);
        args[4] = gunzip;
        // tar-fs extract closes once every entry is written (chmod and utimes included).
        extracted.push(once(stdout, 'close'));
      }
      const p = original(...args);
      sockets.push(p as unknown as Promise<WebSocket>);
      return p;
    }) as Exec['exec'];
    const settled = async (): Promise<number[]> => Promise.all(sockets.map(async (p) => closed(await p)));
    const written = async (): Promise<void> => void (await Promise.all(extracted));
    return { exec, settled, written };
  }

  it('cpToPod then cpFromPod of a small file, content equal', async () => {
    const local = join(fx.work, 'cp-up');
    mkdirSync(local, { recursive: true });
    const content = deterministicBytes(52, 200_000);
    writeFileSync(join(local, 'small.bin'), content);
    const before = await fx.translated(200);

    const up = trackingExec();
    await new Cp(kc, up.exec).cpToPod('default', 'demo', 'demo', local, '.');
    expect(await up.settled()).toEqual([1000]);
    expect(readFileSync(join(fx.cluster.pods.get('default', 'demo')!.workDir, 'small.bin')).equals(content)).toBe(true);

    const target = join(fx.work, 'cp-down');
    mkdirSync(target, { recursive: true });
    const down = trackingExec(true);
    await new Cp(kc, down.exec).cpFromPod('default', 'demo', 'demo', 'small.bin', target);
    expect(await down.settled()).toEqual([1000]);
    await down.written();
    expect(readFileSync(join(target, 'small.bin')).equals(content)).toBe(true);
    expect(await fx.translated(200)).toBe(before + 2);
  });
});

