/**
 * docs/reliability.md lists every case of the malformed-input catalogue, exactly as generated from the
 * case lists (so the doc cannot drift from the tests). `WRITE_RELIABILITY_DOC=1` rewrites that part.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BEGIN_MARKER, CATALOGUE, catalogueMarkdown, END_MARKER } from './malformed-catalogue.js';

const DOC = join(import.meta.dirname, '../../docs/reliability.md');

describe('docs/reliability.md: the malformed input catalogue', () => {
  if (process.env.WRITE_RELIABILITY_DOC) {
    const doc = readFileSync(DOC, 'utf8');
    const start = doc.indexOf(BEGIN_MARKER);
    const end = doc.indexOf(END_MARKER);
    if (start >= 0 && end > start) writeFileSync(DOC, doc.slice(0, start) + catalogueMarkdown() + doc.slice(end + END_MARKER.length));
  }
  const doc = readFileSync(DOC, 'utf8');

  it('has at least 50 cases per protocol', () => {
    const [http, ws, spdyClient, spdyUpstream] = CATALOGUE.map((t) => t.rows.length);
    expect(http).toBeGreaterThanOrEqual(50);
    expect(ws).toBeGreaterThanOrEqual(50);
    expect(spdyClient! + spdyUpstream!).toBeGreaterThanOrEqual(50);
  });

  it('lists every case id, once', () => {
    for (const row of CATALOGUE.flatMap((t) => t.rows)) {
      expect(doc.split(`\n| ${row.id} |`).length - 1, row.id).toBe(1);
    }
  });

  it('holds exactly the generated tables (regenerate with WRITE_RELIABILITY_DOC=1)', () => {
    const start = doc.indexOf(BEGIN_MARKER);
    const end = doc.indexOf(END_MARKER);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(doc.slice(start, end + END_MARKER.length)).toBe(catalogueMarkdown());
  });

  it('puts the catalogue first: "Malformed input catalogue" comes before any "Faults" or "Load and soak" section', () => {
    const at = doc.indexOf('## Malformed input catalogue');
    expect(at).toBeGreaterThanOrEqual(0);
    for (const later of ['## Faults', '## Load and soak']) {
      const i = doc.indexOf(later);
      if (i >= 0) expect(i).toBeGreaterThan(at);
    }
  });
});
