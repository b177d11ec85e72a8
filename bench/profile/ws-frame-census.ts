/**
 * What a real kubectl puts on the wire of a translated session: a TCP relay in front of the proxy
 * that counts the WebSocket frames in each direction after the HTTP upgrade (sizes, FIN, opcodes,
 * how many frames each socket read carried). The proxy's cost per byte on the WebSocket leg depends
 * on exactly this (ws reassembles fragmented messages; every message is one SPDY DATA frame).
 *
 *   node dist/bench/profile/ws-frame-census.js [--bytes N] [--direction stdin|stdout]
 *
 * Starts a dev cluster and a proxy (translation on), runs one kubectl 1.33 transfer through the
 * census relay and prints the tallies. Profiling aid only: nothing in the proxy depends on it.
 */
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeKubeconfig } from '../../dev/kubeconfig.js';
import { findKubectl } from '../../test/helpers/kubectl.js';
import { CLIENT } from '../harness.js';
import { measureTransfer, type Direction } from '../kubectl-throughput.js';
import { startDevClusterProcess, startProxyProcess } from '../servers.js';

/** Frame tallies of one direction of one connection. */
export interface FrameCensus {
  frames: number;
  finalFrames: number;
  continuation: number;
  control: number;
  payloadBytes: number;
  /** payload length → count, for the most common lengths. */
  sizes: Map<number, number>;
  reads: number;
}

/** Parses WebSocket frame headers (RFC 6455 §5.2) out of a byte stream, skipping payloads. */
export class FrameCounter {
  readonly census: FrameCensus = { frames: 0, finalFrames: 0, continuation: 0, control: 0, payloadBytes: 0, sizes: new Map(), reads: 0 };
  #skip = 0;
  #head = Buffer.alloc(0);

  /** Feed one socket read. */
  push(chunk: Buffer): void {
    this.census.reads++;
    let at = 0;
    while (at < chunk.length) {
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, chunk.length - at);
        this.#skip -= n;
        at += n;
        continue;
      }
      const before = this.#head.length;
      this.#head = Buffer.concat([this.#head, chunk.subarray(at, Math.min(chunk.length, at + 14))]);
      const h = this.#head;
      if (h.length < 2) return void (at = chunk.length);
      const masked = (h[1]! & 0x80) !== 0;
      let len = h[1]! & 0x7f;
      let headLen = 2;
      if (len === 126) headLen = 4;
      else if (len === 127) headLen = 10;
      if (masked) headLen += 4;
      if (h.length < headLen) {
        at = chunk.length;
        return;
      }
      if (len === 126) len = h.readUInt16BE(2);
      else if (len === 127) len = Number(h.readBigUInt64BE(2));
      at += headLen - before;
      this.#head = Buffer.alloc(0);
      const fin = (h[0]! & 0x80) !== 0;
      const opcode = h[0]! & 0x0f;
      const c = this.census;
      c.frames++;
      if (fin) c.finalFrames++;
      if (opcode === 0) c.continuation++;
      if (opcode >= 8) c.control++;
      c.payloadBytes += len;
      c.sizes.set(len, (c.sizes.get(len) ?? 0) + 1);
      this.#skip = len;
    }
  }
}

/** A relay that counts frames both ways once it has seen the end of the HTTP exchange's heads. */
function startCensusRelay(target: URL): Promise<{ url: string; censuses: Array<{ up: FrameCounter; down: FrameCounter }>; close(): void }> {
  const censuses: Array<{ up: FrameCounter; down: FrameCounter }> = [];
  const server = createServer({ noDelay: true }, (client: Socket) => {
    const up = connect({ host: target.hostname, port: Number(target.port), noDelay: true });
    const pair = { up: new FrameCounter(), down: new FrameCounter() };
    let upgradedUp = false;
    let upgradedDown = false;
    let headUp = '';
    let headDown = '';
    client.on('data', (c: Buffer) => {
      up.write(c);
      if (upgradedUp) return pair.up.push(c);
      headUp += c.toString('latin1');
      const end = headUp.indexOf('\r\n\r\n');
      if (end >= 0 && /upgrade: websocket/i.test(headUp)) {
        upgradedUp = true;
        censuses.push(pair);
        const rest = Buffer.from(headUp.slice(end + 4), 'latin1');
        if (rest.length > 0) pair.up.push(rest);
      }
    });
    up.on('data', (c: Buffer) => {
      client.write(c);
      if (upgradedDown) return pair.down.push(c);
      headDown += c.toString('latin1');
      const end = headDown.indexOf('\r\n\r\n');
      if (end >= 0 && /^HTTP\/1\.1 101/.test(headDown)) {
        upgradedDown = true;
        const rest = Buffer.from(headDown.slice(end + 4), 'latin1');
        if (rest.length > 0) pair.down.push(rest);
      }
    });
    const close = (): void => void (client.destroy(), up.destroy());
    client.on('error', close).on('close', close);
    up.on('error', close).on('close', close);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, censuses, close: () => server.close() }),
    ),
  );
}

function describe(label: string, c: FrameCensus): string {
  const top = [...c.sizes.entries()].sort((a, b) => b[1] - a[1]).slice(0, 6);
  return (
    `${label}: ${c.frames} frames (${c.finalFrames} FIN, ${c.continuation} continuation, ${c.control} control), ` +
    `${c.payloadBytes} payload bytes in ${c.reads} socket reads; ${(c.frames / Math.max(1, c.reads)).toFixed(2)} frames/read; ` +
    `commonest payload lengths: ${top.map(([len, n]) => `${len}×${n}`).join(', ')}`
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { bytes: { type: 'string', default: '50000000' }, direction: { type: 'string', default: 'stdin' } } });
  const bytes = Number(values.bytes);
  const direction = values.direction as Direction;
  const work = mkdtempSync(join(tmpdir(), 'ksp-census-'));
  const cluster = await startDevClusterProcess();
  let proxy: Awaited<ReturnType<typeof startProxyProcess>> | undefined;
  let relay: Awaited<ReturnType<typeof startCensusRelay>> | undefined;
  try {
    proxy = await startProxyProcess(cluster.url, ['--feature-gates', 'TranslateStreamCloseWebsocketRequests=true,PortForwardWebsockets=true']);
    relay = await startCensusRelay(new URL(proxy.url));
    const kubeconfig = join(work, 'kubeconfig');
    writeKubeconfig(kubeconfig, { server: relay.url, name: 'census' });
    const r = await measureTransfer({
      bin: findKubectl(CLIENT.version),
      kubeconfig,
      env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
      direction,
      bytes,
      timeoutMs: 120_000,
    });
    console.log(`kubectl ${CLIENT.version} ${direction} ${bytes} bytes in ${r.wallMs.toFixed(0)} ms`);
    for (const [i, p] of relay.censuses.entries()) {
      console.log(describe(`connection ${i} client → proxy`, p.up.census));
      console.log(describe(`connection ${i} proxy → client`, p.down.census));
    }
  } finally {
    relay?.close();
    await proxy?.close();
    await cluster.close();
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('ws-frame-census.js')) void main();
