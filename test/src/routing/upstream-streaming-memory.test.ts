/**
 * The per-upstream memory of a fallback (src/routing/upstream-streaming-memory.ts): what it returns,
 * when it forgets (the TTL, on a clock the test moves), and its bound.
 */
import { describe, expect, it } from 'vitest';
import { UPSTREAM_STREAMING_MEMORY_TTL_MS, UpstreamStreamingMemory } from '../../../src/routing/upstream-streaming-memory.js';

describe('UpstreamStreamingMemory', () => {
  it('remembers per upstream name until the TTL, then forgets', () => {
    let now = 1_000;
    const memory = new UpstreamStreamingMemory({ now: () => now });
    expect(memory.preferred('upstream')).toBeUndefined();
    memory.remember('upstream', 'spdy');
    memory.remember('cluster/c1', 'websocket');
    expect(memory.preferred('upstream')).toBe('spdy');
    expect(memory.preferred('cluster/c1')).toBe('websocket');
    expect(memory.preferred('apiservice/v1beta1.metrics.k8s.io')).toBeUndefined();
    now += UPSTREAM_STREAMING_MEMORY_TTL_MS - 1;
    expect(memory.preferred('upstream')).toBe('spdy');
    now += 1;
    expect(memory.preferred('upstream')).toBeUndefined();
    expect(memory.size).toBe(1);
  });

  it('a new fallback replaces the entry and restarts its TTL', () => {
    let now = 0;
    const memory = new UpstreamStreamingMemory({ now: () => now, ttlMs: 100 });
    memory.remember('upstream', 'spdy');
    now = 90;
    memory.remember('upstream', 'websocket');
    now = 150;
    expect(memory.preferred('upstream')).toBe('websocket');
  });

  it('is bounded: the oldest entry goes first', () => {
    const memory = new UpstreamStreamingMemory({ maxEntries: 2 });
    memory.remember('cluster/a', 'spdy');
    memory.remember('cluster/b', 'spdy');
    memory.remember('cluster/c', 'spdy');
    expect(memory.size).toBe(2);
    expect(memory.preferred('cluster/a')).toBeUndefined();
    expect(memory.preferred('cluster/b')).toBe('spdy');
    expect(memory.preferred('cluster/c')).toBe('spdy');
  });
});
