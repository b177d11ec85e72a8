/** loadYamlDocuments: empty documents skipped, positions and lines, errors located in the stream. */
import { describe, expect, it } from 'vitest';
import { loadYamlDocuments } from '../../../src/aggregation/yaml-documents.js';

describe('loadYamlDocuments', () => {
  it('skips empty and comment-only documents, numbering the rest with their first line', () => {
    const text = '---\n# header\na: 1\n---\n---\n# only a comment\n---\nb: 2\n...\n---\n';
    expect(loadYamlDocuments(text, 'f')).toEqual([
      { where: 'document 1 (line 1)', objects: [{ a: 1 }] },
      { where: 'document 2 (line 7)', objects: [{ b: 2 }] },
    ]);
  });

  it('keeps content after the marker and reads JSON documents', () => {
    expect(loadYamlDocuments('--- {"a": 1}\n---\n{"b": [1, 2]}\n', 'f').map((d) => ('objects' in d ? d.objects : d.error))).toEqual([[{ a: 1 }], [{ b: [1, 2] }]]);
  });

  it('does not split at an indented --- inside a block scalar', () => {
    expect(loadYamlDocuments('a: |\n  x\n  ---\n  y\n', 'f')).toEqual([{ where: 'document 1 (line 1)', objects: [{ a: 'x\n---\ny\n' }] }]);
  });

  it('reports a syntax error with its line in the whole stream, and a null document', () => {
    const [, bad] = loadYamlDocuments('a: 1\n---\nb: 2\nc: [\n', 'f');
    expect(bad).toMatchObject({ where: 'document 2 (line 2)' });
    expect('error' in bad! && bad.error).toMatch(/^invalid YAML: .* \(line [45], column \d+\)$/);
    expect(loadYamlDocuments('~\n', 'f')).toEqual([{ where: 'document 1 (line 1)', error: 'is not an object' }]);
  });
});
