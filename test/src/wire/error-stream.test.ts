import { describe, expect, it } from 'vitest';
import { nonZeroExitStatus } from '../../../src/status.js';
import { decodeErrorStream } from '../../../src/wire/error-stream.js';
import { statusOf, statusOfError } from '../../../translator/stream-translator.js';
import { UpstreamUpgradeRefusedError } from '../../../src/errors.js';
import { errorStatus } from '../../../src/status.js';

const v4 = 'v4.channel.k8s.io';

describe('error stream decoding (client-go errorDecoderV4 / V2)', () => {
  it('v4 Success', () => {
    expect(decodeErrorStream(v4, Buffer.from('{"metadata":{},"status":"Success"}'))).toEqual({ kind: 'success' });
  });

  it('v4 NonZeroExitCode is passed through with its exit code', () => {
    const status = nonZeroExitStatus(3);
    expect(decodeErrorStream(v4, Buffer.from(JSON.stringify(status)))).toEqual({ kind: 'exit', exitCode: 3, status });
  });

  it.each([
    ['exit code out of uint8', { ...nonZeroExitStatus(3), details: { causes: [{ reason: 'ExitCode', message: '256' }] } }, 'invalid exit code value "256"'],
    ['no ExitCode cause', { ...nonZeroExitStatus(3), details: { causes: [] } }, 'no ExitCode cause given'],
    ['no details', { metadata: {}, status: 'Failure', reason: 'NonZeroExitCode' }, 'details must be set'],
    ['other failure', { metadata: {}, status: 'Failure', message: 'boom', reason: 'InternalError' }, 'boom'],
    ['unknown status', { metadata: {}, status: 'Weird' }, 'unknown error'],
  ])('v4 %s is an error', (_name, body, message) => {
    const o = decodeErrorStream(v4, Buffer.from(JSON.stringify(body)));
    expect(o.kind).toBe('error');
    expect(o.kind === 'error' && o.message).toContain(message);
  });

  it('v4 garbage is a protocol error', () => {
    const o = decodeErrorStream(v4, Buffer.from('not json'));
    expect(o.kind === 'error' && o.message).toMatch(/^error stream protocol error/);
  });

  it('v1–v3: nothing is success, text is an error', () => {
    expect(decodeErrorStream('v3.channel.k8s.io', Buffer.alloc(0))).toEqual({ kind: 'success' });
    expect(decodeErrorStream('channel.k8s.io', Buffer.from('command terminated'))).toEqual({
      kind: 'error',
      message: 'error executing remote command: command terminated',
    });
  });
});

describe('outcome → channel-3 Status and counter code', () => {
  it('success and non-zero exit count as 200', () => {
    expect(statusOf({ kind: 'success' })).toEqual({ status: { metadata: {}, status: 'Success' }, code: 200 });
    const exit = nonZeroExitStatus(7);
    expect(statusOf({ kind: 'exit', exitCode: 7, status: exit })).toEqual({ status: exit, code: 200 });
  });

  it('errors are InternalError 500', () => {
    const r = statusOf({ kind: 'error', message: 'boom' });
    expect(r.code).toBe(500);
    expect(r.status).toMatchObject({ status: 'Failure', reason: 'InternalError', code: 500, message: 'Internal error occurred: boom' });
    expect(statusOfError(new Error('dial failed')).code).toBe(500);
  });

  it("an upstream refusal with a Status body reports that Status and counts its code", () => {
    const status = errorStatus(404, 'pods "nope" not found', 'NotFound');
    expect(statusOfError(new UpstreamUpgradeRefusedError(404, status, true))).toEqual({ status, code: 404 });
  });

  it('an upstream refusal without a Status body is an InternalError', () => {
    const r = statusOfError(new UpstreamUpgradeRefusedError(500, errorStatus(500, 'unable to upgrade connection: nope'), false));
    expect(r.code).toBe(500);
    expect(r.status.message).toBe('Internal error occurred: unable to upgrade connection: nope');
  });
});
