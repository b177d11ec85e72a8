/**
 * Acceptance for audit events and graceful shutdown (issue 6), in-process: the proxy's pino output
 * is captured and parsed; `shutdown(graceMs)` is driven directly (the CLI's SIGTERM handler calls
 * the same method; sigterm-child.test.ts covers the real signal).
 *
 * The dev cluster plays kube-apiserver 1.36, which takes kubectl's WebSocket v5 itself, so the
 * proxy's default passes v5 through. What only the translator does — the exit code on the audit
 * line (from the Status it decodes), the shutdown Status on channel 3 — is tested with
 * `--upstream-streaming spdy` (the translator at once); what a passed-through WebSocket session gets
 * is tested on the default: no exit code (the bytes are not parsed), and after the grace period it is
 * closed, as kube-apiserver closes the streams it proxies when it stops (no Status: the proxy does not
 * speak the protocol it relays).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FORCE_SPDY_ENV, findKubectl, kubectlE2eSkipReason, runKubectl, startKubectl, summary } from '../helpers/kubectl.js';
import { moved, wayCounts } from '../dev/cluster/streaming-ways.js';
import { eventually, startOperabilityFixture, type OperabilityFixture } from './operability-fixture.js';

const skipReason = kubectlE2eSkipReason();

describe.skipIf(skipReason !== undefined)('audit events and graceful shutdown (kubectl 1.33)', () => {
  let fx: OperabilityFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  it('one audit event per kubectl exec with command, exit code and byte counts', async () => {
    // The exit code comes from the translator's Status: translate here.
    fx = await startOperabilityFixture({ upstreamStreaming: 'spdy' });
    const f = fx;
    const bin = findKubectl('1.33');
    const input = Buffer.from('hello audit\n');
    const r = await runKubectl(bin, ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; echo err >&2; exit 3'], {
      kubeconfig: f.kubeconfig,
      stdin: input,
      timeoutMs: 60_000,
    });
    expect(r.code, summary(r)).toBe(3);
    const [event] = await eventually('the audit event', () => (f.audits().length === 1 ? f.audits() : undefined));
    expect(event).toMatchObject({
      audit: true,
      msg: 'streaming session',
      namespace: 'default',
      pod: 'demo',
      subresource: 'exec',
      command: ['sh', '-c', 'cat; echo err >&2; exit 3'],
      clientProtocol: 'websocket',
      subprotocol: 'v5.channel.k8s.io',
      path: 'translated',
      statusCode: 101,
      exitCode: 3,
      outcome: 'nonzero_exit',
      bytesToUpstream: input.length,
      // stdout "hello audit\n" and stderr "err\n".
      bytesToClient: input.length + 4,
    });
    expect(event!.user).toBeUndefined();
    expect(typeof event!.durationMs).toBe('number');
    // The request id ties the audit line to the request's other log lines.
    expect(event!.reqId).toMatch(/^[0-9a-f-]{36}$/);
    expect(f.logs.filter((l) => l.reqId === event!.reqId && l.msg === 'translated connection started')).toHaveLength(1);

    // The passthrough path says it cannot know the exit code.
    const spdy = await runKubectl(bin, ['exec', 'demo', '--', 'sh', '-c', 'exit 5'], { kubeconfig: f.kubeconfig, env: FORCE_SPDY_ENV, timeoutMs: 60_000 });
    expect(spdy.code, summary(spdy)).toBe(5);
    const passthrough = await eventually('the passthrough audit event', () => f.audits()[1]);
    expect(passthrough).toMatchObject({ clientProtocol: 'spdy', path: 'passthrough', exitCode: null, outcome: 'success', command: ['sh', '-c', 'exit 5'] });
    expect(passthrough.exitCodeUnknown).toMatch(/passthrough/);
    expect(passthrough.bytesToClient as number).toBeGreaterThan(0);
    expect(f.audits()).toHaveLength(2);
  });

  it('the default passes kubectl\'s v5 exec through: its audit event says so, without an exit code', async () => {
    fx = await startOperabilityFixture();
    const f = fx;
    const ways = await wayCounts(f.cluster);
    const input = Buffer.from('hello audit\n');
    const r = await runKubectl(findKubectl('1.33'), ['exec', '-i', 'demo', '--', 'sh', '-c', 'cat; echo err >&2; exit 3'], { kubeconfig: f.kubeconfig, stdin: input, timeoutMs: 60_000 });
    expect(r.code, summary(r)).toBe(3);
    expect(r.stdout.toString()).toBe('hello audit\n');
    const [event] = await eventually('the audit event', () => (f.audits().length === 1 ? f.audits() : undefined));
    expect(event).toMatchObject({
      audit: true,
      msg: 'streaming session',
      pod: 'demo',
      subresource: 'exec',
      command: ['sh', '-c', 'cat; echo err >&2; exit 3'],
      clientProtocol: 'websocket',
      path: 'passthrough',
      statusCode: 101,
      exitCode: null,
      outcome: 'success',
    });
    expect(event!.exitCodeUnknown).toMatch(/passthrough/);
    expect(event!.fallback).toBeUndefined();
    // Byte counts of the relayed WebSocket frames: more than the payload.
    expect(event!.bytesToUpstream as number).toBeGreaterThan(input.length);
    expect(event!.bytesToClient as number).toBeGreaterThan(input.length + 4);
    // Proven by the counters, not by "it worked": passed through here, served by the dev cluster's kubelet.
    expect(await f.value('apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
    expect(await f.value('apiserver_stream_translator_requests_total')).toBe(0);
    expect(moved(ways, await wayCounts(f.cluster))).toEqual({ 'apiserver/exec/proxied_to_kubelet': 1, 'kubelet/exec': 1 });
  });

  it('shutdown: a session that ends within the grace period finishes with exit 0; readyz fails; no new connections', async () => {
    fx = await startOperabilityFixture();
    const f = fx;
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 3; echo done'], { kubeconfig: f.kubeconfig, env: {} });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      // kubectl's v5, passed through (the default, to a dev cluster that takes WebSockets).
      expect(await f.value('kube_stream_proxy_active_sessions', { subresource: 'exec', path: 'passthrough' })).toBe(1);
      expect(await f.value('apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
      const shutdown = f.proxy.shutdown(20_000);
      expect(f.proxy.draining).toBe(true);
      const ready = await f.proxy.app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(500);
      expect(ready.body).toContain('[-]shutdown failed: reason withheld');
      await expect(fetch(`${f.proxy.url}/livez`)).rejects.toThrow();
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit, JSON.stringify(kubectl.output())).toEqual({ code: 0, signal: null, killed: false });
      expect(kubectl.output().stdout).toBe('started\ndone\n');
      expect(await shutdown).toEqual({ sessionsAtStart: 1, sessionsStopped: 0 });
      expect(f.audits().map((a) => a.outcome)).toEqual(['success']);
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });

  it('shutdown: a translated session outliving the grace period gets the shutdown Status; kubectl exits non-zero with that message', async () => {
    // The Status on channel 3 is the translator's: translate here.
    fx = await startOperabilityFixture({ upstreamStreaming: 'spdy' });
    const f = fx;
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: f.kubeconfig, env: {} });
    const spdy = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: f.kubeconfig, env: FORCE_SPDY_ENV });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      await spdy.waitForOutput(/started/, 30_000);
      await eventually('two active sessions', async () => ((await f.value('kube_stream_proxy_active_sessions')) === 2 ? true : undefined));
      const report = await f.proxy.shutdown(1_000);
      expect(report).toEqual({ sessionsAtStart: 2, sessionsStopped: 2 });
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(exit.code, JSON.stringify(kubectl.output())).not.toBe(0);
      expect(exit.killed).toBe(false);
      expect(kubectl.output().stderr).toContain('proxy shutting down');
      // The passthrough cannot write a Status into a protocol it does not parse: it closes the
      // connection, and kubectl (client-go reads the missing status as success) exits on its own,
      // long before `sleep 60` would have ended, without a message (ANCHORS §3 item 16).
      const spdyExit = await spdy.stop('SIGCONT', 20_000);
      expect(spdyExit, JSON.stringify(spdy.output())).toMatchObject({ signal: null, killed: false });
      const outcomes = f.audits().map((a) => `${a.path}:${a.outcome}`).sort();
      expect(outcomes).toEqual(['passthrough:shutdown', 'translated:shutdown']);
      const translated = f.audits().find((a) => a.path === 'translated')!;
      expect(translated).toMatchObject({ exitCode: null, message: 'proxy shutting down', statusCode: 101 });
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
      await spdy.stop('SIGKILL', 5_000);
    }
  });

  it('shutdown: a passed-through WebSocket session outliving the grace period is closed; kubectl exits non-zero on its own', async () => {
    fx = await startOperabilityFixture();
    const f = fx;
    const kubectl = startKubectl(findKubectl('1.33'), ['exec', 'demo', '--', 'sh', '-c', 'echo started; sleep 60'], { kubeconfig: f.kubeconfig, env: {} });
    try {
      await kubectl.waitForOutput(/started/, 30_000);
      expect(await f.value('kube_stream_proxy_active_sessions', { subresource: 'exec', path: 'passthrough' })).toBe(1);
      expect(await f.value('apiserver_websocket_streaming_requests_total', { subresource: 'exec', proxy_type: 'proxied_to_upstream' })).toBe(1);
      expect(f.cluster.pods.get('default', 'demo')!.execs.size).toBe(1);
      const report = await f.proxy.shutdown(1_000);
      expect(report).toEqual({ sessionsAtStart: 1, sessionsStopped: 1 });
      const closedAt = Date.now();
      // It ends on its own, long before `sleep 60`: the connection was closed under it.
      const exit = await kubectl.stop('SIGCONT', 20_000);
      expect(Date.now() - closedAt).toBeLessThan(15_000);
      expect(exit.killed).toBe(false);
      expect(exit.code, JSON.stringify(kubectl.output())).not.toBe(0);
      // No Status (the proxy does not write into a protocol it relays): client-go reports the lost stream.
      expect(kubectl.output().stderr).toContain('error reading from error stream');
      expect(kubectl.output().stderr).not.toContain('proxy shutting down');
      const [event] = await eventually('the audit event', () => (f.audits().length === 1 ? f.audits() : undefined));
      expect(event).toMatchObject({ clientProtocol: 'websocket', path: 'passthrough', outcome: 'shutdown', statusCode: 101, exitCode: null });
      // The upstream's side was closed too: the dev cluster ended the session and its `sleep 60`.
      await eventually('the exec gone in the dev cluster', () => (f.cluster.pods.get('default', 'demo')!.execs.size === 0 ? true : undefined));
    } finally {
      await kubectl.stop('SIGKILL', 5_000);
    }
  });
});
