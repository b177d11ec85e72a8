/** `serve`'s aggregation flags: invalid registrations and half-given certificates stop start-up with a clear error. */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'ksp-apiservice-flags-'));
const bin = join(__dirname, '../../bin/kube-stream-proxy.js');

describe('--apiservice-config at start-up', () => {
  it('an invalid APIService stops `serve` with exit code 2 and names the document and field', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1beta1.metrics.k8s.io}\nspec: {group: metrics.k8s.io, version: v1beta1, groupPriorityMinimum: 100, versionPriority: 0, service: {namespace: kube-system, name: metrics-server}}\n');
    const r = await run(process.execPath, [bin, 'serve', '--listen', '127.0.0.1:0', '--upstream', 'http://127.0.0.1:9', '--apiservice-config', file]).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(file);
    expect(r.stderr).toContain('spec.versionPriority');
  });

  it('a missing file and a certificate without its key are refused', async () => {
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:9', apiserviceConfig: join(dir, 'missing.yaml') })).rejects.toThrow(/--apiservice-config .*missing\.yaml/);
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:9', apiserviceConfig: join(dir, 'x'), proxyClientCertFile: '/x.crt' })).rejects.toThrow('--proxy-client-cert-file and --proxy-client-key-file must be given together');
    await expect(resolveConfig({ listen: '127.0.0.1:0', upstream: 'http://127.0.0.1:9', proxyClientCertFile: '/x.crt', proxyClientKeyFile: '/x.key' })).rejects.toThrow('--proxy-client-cert-file needs --apiservice-config');
  });
});
