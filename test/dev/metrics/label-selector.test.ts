import { describe, expect, it } from 'vitest';
import { parseFieldSelector, parseLabelSelector } from '../../../dev/metrics/label-selector.js';

const web = { name: 'web-1', namespace: 'default', labels: { app: 'web', tier: 'front' } };
const db = { name: 'db-1', namespace: 'prod', labels: { app: 'db' } };
const bare = { name: 'bare', namespace: 'default', labels: {} };
const all = [web, db, bare];

describe('parseLabelSelector', () => {
  it.each([
    ['', ['web-1', 'db-1', 'bare']],
    ['app=web', ['web-1']],
    ['app==web', ['web-1']],
    ['app!=web', ['db-1', 'bare']],
    ['app', ['web-1', 'db-1']],
    ['!app', ['bare']],
    ['app in (web, db)', ['web-1', 'db-1']],
    ['app notin (web)', ['db-1', 'bare']],
    ['app in (web,db),tier=front', ['web-1']],
    ['app, !tier', ['db-1']],
  ])('%j selects %j', (selector, want) => {
    const s = parseLabelSelector(selector);
    if (!s.ok) throw new Error(s.status.message);
    expect(all.filter(s.matches).map((o) => o.name)).toEqual(want);
  });
  it.each(['app=(', 'app in web', '=web', 'app in (a,(b))', 'a b'])('refuses %j with a 400 Status', (selector) => {
    const s = parseLabelSelector(selector);
    expect(s.ok).toBe(false);
    if (!s.ok) expect(s.status).toMatchObject({ kind: 'Status', code: 400, reason: 'BadRequest' });
  });
});

describe('parseFieldSelector', () => {
  it('matches metadata.name and metadata.namespace', () => {
    const s = parseFieldSelector('metadata.namespace=default,metadata.name!=bare');
    if (!s.ok) throw new Error(s.status.message);
    expect(all.filter(s.matches).map((o) => o.name)).toEqual(['web-1']);
  });
  it('refuses other fields as the apiserver does', () => {
    const s = parseFieldSelector('spec.nodeName=x');
    expect(s.ok).toBe(false);
    if (!s.ok) expect(s.status).toMatchObject({ code: 400, message: 'field label not supported: spec.nodeName' });
  });
});
