/**
 * An aggregated API's upgraded session is never cut for being idle by the proxy (KubeVirt consoles
 * sit idle for long stretches). Time is simulated: every timer the proxy sets runs on fake timers
 * advanced by eleven minutes while the session is idle, and the socket-level idle timeout (which
 * Node keeps outside the timer functions) is asserted to be unset on the proxy's side of the
 * upgraded connection. The session must echo before and after.
 */
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { resolveConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { createCa, createServerCert } from '../helpers/certs.js';
import { openConsole, startExtensionApiServer, type ExtensionApiServer } from './extension-apiserver.js';

const dir = mkdtempSync(join(tmpdir(), 'ksp-idle-'));
let backend: ExtensionApiServer;
let proxy: RunningServer;
const upgraded: Socket[] = [];

beforeAll(async () => {
  const ca = await createCa(dir);
  const serving = await createServerCert(dir, ca);
  backend = await startExtensionApiServer({ cert: serving.cert, key: serving.key, clientCa: ca.cert });
  const file = join(dir, 'apiservices.yaml');
  writeFileSync(
    file,
    `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.things.example.com
  annotations:
    kube-stream-proxy.io/backend-url: https://127.0.0.1:${backend.port}
spec:
  group: things.example.com
  version: v1
  service: null
  caBundle: ${ca.cert.toString('base64')}
  groupPriorityMinimum: 1000
  versionPriority: 15
`,
  );
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'], shouldAdvanceTime: true });
  const config = await resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:9', apiserviceConfig: file });
  proxy = await startServer(config, { aggregatorIntervals: { recheckMs: 60_000, retryMs: 100 } });
  proxy.app.server.on('upgrade', (_req: IncomingMessage, socket: Socket) => upgraded.push(socket));
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${proxy.url}/apis/apiregistration.k8s.io/v1/apiservices/v1.things.example.com`);
    const a = (await res.json()) as { status: { conditions: { status: string }[] } };
    if (a.status.conditions[0]?.status === 'True') break;
    await vi.advanceTimersByTimeAsync(100);
  }
}, 60_000);

afterAll(async () => {
  vi.useRealTimers();
  await proxy?.close();
  await backend?.close();
});

describe('an idle aggregated-API session', () => {
  it('survives 11 minutes of simulated idleness through the proxy; no idle timeout on the upgraded socket', async () => {
    const { ws, echo } = await openConsole(proxy.url);
    expect(await echo('before')).toBe('before');
    const closed = vi.fn();
    ws.on('close', closed);
    await vi.advanceTimersByTimeAsync(11 * 60_000);
    expect(closed).not.toHaveBeenCalled();
    expect(await echo('after eleven minutes')).toBe('after eleven minutes');
    expect(upgraded).toHaveLength(1);
    // Node's socket idle timer (socket.setTimeout) is not one of the faked functions: assert it is off.
    expect((upgraded[0] as Socket & { timeout?: number }).timeout ?? 0).toBe(0);
    ws.close();
    await once(ws, 'close');
  });
});
