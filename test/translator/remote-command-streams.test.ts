import { afterEach, describe, expect, it } from 'vitest';
import type { SpdyStream } from '../../src/spdy/index.js';
import { StreamProtocolV4Name } from '../../src/stream-protocol.js';
import { openRemoteCommandStreams } from '../../translator/remote-command-streams.js';
import { connectionPair, digest } from '../src/spdy/helpers.js';

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('openRemoteCommandStreams', { timeout: 20_000 }, () => {
  it('opens error, stdin, stdout, stderr in order, then releases the header decompressor; the session still works', async () => {
    const p = await connectionPair();
    cleanups.push(() => p.sockets.close());
    const seen: string[] = [];
    const upstream = new Map<string, SpdyStream>();
    p.server.on('stream', (s: SpdyStream) => {
      const type = s.headers['streamtype']![0]!;
      seen.push(type);
      upstream.set(type, s);
      s.reply();
    });
    const streams = await openRemoteCommandStreams(p.client, StreamProtocolV4Name, { stdin: true, stdout: true, stderr: true, tty: false });
    expect(seen).toEqual(['error', 'stdin', 'stdout', 'stderr']);
    expect(p.client.headerDecompressorReleased).toBe(true);
    // Data still flows both ways afterwards.
    const up = digest(upstream.get('stdin')!);
    streams.stdin!.end('hello');
    expect((await up).bytes).toBe(5);
    const down = digest(streams.stdout!);
    upstream.get('stdout')!.end('world!');
    expect((await down).bytes).toBe(6);
    expect(p.client.closed).toBe(false);
  });

  it('does not release when a reply never comes (the caller destroys the connection)', async () => {
    const p = await connectionPair();
    cleanups.push(() => p.sockets.close());
    p.server.on('stream', (s: SpdyStream) => {
      if (s.headers['streamtype']![0] !== 'stdout') s.reply();
    });
    await expect(openRemoteCommandStreams(p.client, StreamProtocolV4Name, { stdin: false, stdout: true, stderr: false, tty: false }, 200)).rejects.toThrow(/no SYN_REPLY/);
    expect(p.client.headerDecompressorReleased).toBe(false);
  });
});
