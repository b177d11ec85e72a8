import { describe, expect, it } from 'vitest';
import { parsePortForwardPorts, parseStreamOptions, queryBool, resolveContainer } from '../../../dev/cluster/stream-options.js';

const onePod = { name: 'demo', containers: [{ name: 'demo' }] };
const twoPod = { name: 'multi', containers: [{ name: 'a' }, { name: 'b' }] };
const q = (s: string): URLSearchParams => new URLSearchParams(s);

describe('queryBool', () => {
  it.each([
    ['', false],
    ['x=0', false],
    ['x=false', false],
    ['x=FALSE', false],
    ['x=False', false],
    ['x=', true],
    ['x', true],
    ['x=1', true],
    ['x=true', true],
    ['x=yes', true],
    ['x=no', true],
    ['x=0&x=1', false],
    ['x=1&x=0', true],
  ])('%s → %s', (query, want) => {
    expect(queryBool(q(query), 'x')).toBe(want);
  });
});

describe('resolveContainer', () => {
  it('defaults to the only container', () => {
    expect(resolveContainer(onePod, '')).toEqual({ ok: true, value: 'demo' });
  });
  it('requires a name with several containers', () => {
    const r = resolveContainer(twoPod, '');
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.status.code).toBe(400);
      expect(r.status.message).toBe('a container name must be specified for pod multi, choose one of: [a b]');
    }
  });
  it('rejects an unknown container', () => {
    const r = resolveContainer(twoPod, 'c');
    expect(r.ok ? undefined : [r.status.code, r.status.message, r.status.reason]).toEqual([
      400,
      'container c is not valid for pod multi',
      'BadRequest',
    ]);
  });
  it('accepts a named one', () => {
    expect(resolveContainer(twoPod, 'b')).toEqual({ ok: true, value: 'b' });
  });
});

describe('parseStreamOptions', () => {
  it('parses the client-node exec query', () => {
    const r = parseStreamOptions('exec', q('stdout=true&stderr=true&stdin=false&tty=false&command=ls&command=-l&container=demo'), onePod);
    expect(r).toEqual({
      ok: true,
      value: { stdin: false, stdout: true, stderr: true, tty: false, container: 'demo', command: ['ls', '-l'] },
    });
  });
  it('drops stderr with a tty', () => {
    const r = parseStreamOptions('exec', q('stdin=1&stdout=1&stderr=1&tty=1&command=sh'), onePod);
    expect(r.ok && r.value).toMatchObject({ stdin: true, stdout: true, stderr: false, tty: true });
  });
  it('needs a stream', () => {
    const r = parseStreamOptions('exec', q('command=ls&tty=true&stderr=true'), onePod);
    expect(r.ok ? undefined : [r.status.code, r.status.message]).toEqual([400, 'you must specify at least 1 of stdin, stdout, stderr']);
  });
  it('needs a command for exec but not for attach', () => {
    const exec = parseStreamOptions('exec', q('stdout=1'), onePod);
    expect(exec.ok ? 0 : exec.status.code).toBe(400);
    const attach = parseStreamOptions('attach', q('stdout=1&command=ignored'), onePod);
    expect(attach).toEqual({
      ok: true,
      value: { stdin: false, stdout: true, stderr: false, tty: false, container: 'demo', command: [] },
    });
  });
  it('resolves the container before anything else', () => {
    const r = parseStreamOptions('exec', q('stdout=1&command=ls'), twoPod);
    expect(r.ok ? 0 : r.status.code).toBe(400);
  });
});

describe('parsePortForwardPorts', () => {
  it.each([
    ['ports=80', [80]],
    ['ports=80&ports=443', [80, 443]],
    ['ports=80,443', [80, 443]],
    ['port=8080', [8080]],
  ])('%s', (query, want) => {
    expect(parsePortForwardPorts(q(query), true)).toEqual({ ok: true, value: want });
  });
  it('requires a port on the legacy WebSocket path', () => {
    const r = parsePortForwardPorts(q(''), true);
    expect(r.ok ? undefined : [r.status.code, r.status.message]).toEqual([400, 'query parameter "port" is required']);
    expect(parsePortForwardPorts(q(''), false)).toEqual({ ok: true, value: [] });
  });
  it.each(['ports=', 'ports=x', 'ports=0', 'ports=65536', 'ports=80,', 'ports=-1'])('rejects %s', (query) => {
    const r = parsePortForwardPorts(q(query), true);
    expect(r.ok ? 0 : r.status.code).toBe(400);
  });
});
