import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDevMetricsArgs } from '../../../dev/metrics/command.js';

let dir: string;
let cert: string;
let key: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'dev-metrics-args-'));
  cert = join(dir, 'tls.crt');
  key = join(dir, 'tls.key');
  writeFileSync(cert, 'CERT');
  writeFileSync(key, 'KEY');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseDevMetricsArgs', () => {
  it('takes the defaults', () => {
    expect(parseDevMetricsArgs(['--cluster', 'http://127.0.0.1:6444'])).toEqual({
      help: false,
      options: { host: '127.0.0.1', port: 6445, cluster: 'http://127.0.0.1:6444', clusterTokenFile: undefined, scrapeIntervalMs: undefined, metricResolutionMs: undefined },
    });
    expect(parseDevMetricsArgs(['-h'])).toEqual({ help: true });
  });

  it('reads TLS, request-header lists and durations', () => {
    const args = parseDevMetricsArgs([
      '--cluster', 'http://127.0.0.1:1', '--listen', '0.0.0.0:0',
      '--tls-cert-file', cert, '--tls-private-key-file', key,
      '--requestheader-client-ca-file', cert, '--requestheader-allowed-names', 'front-proxy-client, aggregator',
      '--requestheader-username-headers', 'X-Remote-User', '--requestheader-group-headers', 'X-Remote-Group,X-Group',
      '--scrape-interval', '500ms', '--metric-resolution', '30s',
    ]);
    if (args.help) throw new Error('help');
    expect(args.options).toMatchObject({
      host: '0.0.0.0',
      port: 0,
      tls: { cert: Buffer.from('CERT'), key: Buffer.from('KEY') },
      requestHeader: {
        clientCa: Buffer.from('CERT'),
        allowedNames: ['front-proxy-client', 'aggregator'],
        usernameHeaders: ['X-Remote-User'],
        groupHeaders: ['X-Remote-Group', 'X-Group'],
        extraHeaderPrefixes: undefined,
      },
      scrapeIntervalMs: 500,
      metricResolutionMs: 30_000,
    });
  });

  it.each([
    [[], /--cluster is required/],
    [['--cluster', 'u', '--tls-cert-file', 'x'], /must be given together/],
    [['--cluster', 'u', '--listen', '0.0.0.0:1'], /plain HTTP is allowed only on a loopback/],
    [['--cluster', 'u', '--requestheader-client-ca-file', 'x'], /needs --tls-cert-file/],
    [['--cluster', 'u', '--requestheader-allowed-names', 'a'], /needs --requestheader-client-ca-file/],
    [['--cluster', 'u', '--scrape-interval', '0'], /must be positive/],
    [['--cluster', 'u', '--scrape-interval', 'soon'], /invalid duration/],
    [['--cluster', 'u', '--bogus'], /Unknown option/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseDevMetricsArgs(argv as string[])).toThrow(message);
  });
});
