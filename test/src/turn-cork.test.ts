import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { TurnCork } from '../../src/turn-cork.js';

/** A destination that records, for each write, whether it was corked when written. */
function recorder(): { dest: { cork(): void; uncork(): void; writableEnded: boolean }; corkedAt: boolean[]; write(): void } {
  let depth = 0;
  const corkedAt: boolean[] = [];
  const dest = {
    writableEnded: false,
    cork: () => void depth++,
    uncork: () => void (depth = Math.max(0, depth - 1)),
  };
  return { dest, corkedAt, write: () => void corkedAt.push(depth > 0) };
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('TurnCork', () => {
  it('lets the first write of a turn out at once and corks the ones after it until the turn ends', async () => {
    const r = recorder();
    const turn = new TurnCork(r.dest);
    for (let i = 0; i < 3; i++) {
      turn.beforeWrite();
      r.write();
    }
    expect(r.corkedAt).toEqual([false, true, true]);
    expect(turn.turnOpen).toBe(true);
    await nextTurn();
    expect(turn.turnOpen).toBe(false);
    // The next turn starts over: first write uncorked again.
    turn.beforeWrite();
    r.write();
    turn.beforeWrite();
    r.write();
    expect(r.corkedAt).toEqual([false, true, true, false, true]);
    await nextTurn();
    turn.beforeWrite();
    r.write();
    expect(r.corkedAt.at(-1)).toBe(false);
  });

  it('does not cork an ended destination', async () => {
    const r = recorder();
    const turn = new TurnCork(r.dest);
    turn.beforeWrite();
    r.write();
    r.dest.writableEnded = true;
    turn.beforeWrite();
    r.write();
    expect(r.corkedAt).toEqual([false, false]);
    await nextTurn();
  });

  it('on a real socket: the first write reaches the kernel at once, the turn’s later ones together after it, all in order', async () => {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    const port = (server.address() as { port: number }).port;
    const client = connect(port, '127.0.0.1');
    await once(client, 'connect');
    const [peer] = await accepted;
    try {
      const received: Buffer[] = [];
      peer.on('data', (c: Buffer) => received.push(c));
      const turn = new TurnCork(client);
      turn.beforeWrite();
      client.write('a');
      // Nothing queued in Node: the first write went to the kernel synchronously.
      expect(client.writableLength).toBe(0);
      turn.beforeWrite();
      client.write('b');
      turn.beforeWrite();
      client.write('c');
      // Corked: held in Node until the turn ends.
      expect(client.writableLength).toBe(2);
      expect(client.writableCorked).toBe(1);
      await nextTurn();
      expect(client.writableCorked).toBe(0);
      await new Promise<void>((resolve) => {
        const check = (): void => (Buffer.concat(received).length >= 3 ? resolve() : void peer.once('data', check));
        check();
      });
      expect(Buffer.concat(received).toString()).toBe('abc');
    } finally {
      client.destroy();
      peer.destroy();
      server.close();
    }
  });
});
