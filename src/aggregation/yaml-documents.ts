/**
 * A YAML (or JSON) stream split into its documents and decoded with client-node's `loadAllYaml`
 * (`@kubernetes/client-node` 1.4 exports `loadYaml`, `loadAllYaml` and `dumpYaml`, over its bundled
 * js-yaml), each document named by its position and first line for error messages.
 *
 * The stream is split at `---` / `...` markers in column 0 (where the YAML spec reserves them, even
 * inside block scalars), so empty documents — a trailing `---`, a comment-only document — are
 * skipped: `loadAllYaml` fails on a null document with a bare TypeError. A syntax error is reported
 * with its line in the whole stream, not in the document.
 */
import { loadAllYaml } from '@kubernetes/client-node';

/** One decoded document, or why it could not be decoded. */
export type YamlDocumentResult =
  | { readonly where: string; readonly objects: unknown[] }
  | { readonly where: string; readonly error: string };

interface RawDocument {
  /** 1-based line of the document's first line. */
  line: number;
  text: string;
}

function isBlankOrComment(l: string): boolean {
  const t = l.trim();
  return t === '' || t.startsWith('#') || t.startsWith('%');
}

function splitDocuments(text: string): RawDocument[] {
  const docs: RawDocument[] = [];
  let current: string[] = [];
  let startLine = 1;
  const lines = text.split(/\r?\n/);
  const flush = (nextStart: number) => {
    docs.push({ line: startLine, text: current.join('\n') });
    current = [];
    startLine = nextStart;
  };
  lines.forEach((l, i) => {
    if (/^---(\s|$)/.test(l)) {
      flush(i + 1);
      current.push(l.slice(3)); // content after the marker belongs to the new document
    } else if (/^\.\.\.(\s|$)/.test(l)) {
      flush(i + 2);
    } else {
      current.push(l);
    }
  });
  flush(lines.length + 1);
  return docs.filter((d) => !d.text.split('\n').every(isBlankOrComment));
}

interface YamlErrorLike {
  reason?: string;
  mark?: { line?: number; column?: number };
}

function describeYamlError(e: unknown, doc: RawDocument): string {
  const y = e as YamlErrorLike;
  if (y && typeof y.reason === 'string' && y.mark && typeof y.mark.line === 'number') {
    return `invalid YAML: ${y.reason} (line ${doc.line + y.mark.line}, column ${(y.mark.column ?? 0) + 1})`;
  }
  if (e instanceof TypeError) return 'is not an object';
  return `cannot be decoded: ${e instanceof Error ? e.message : String(e)}`;
}

/**
 * Decode every non-empty document of `text`; `where` reads `document N (line L)`. `source` (a file
 * name) is passed to the YAML parser.
 */
export function loadYamlDocuments(text: string, source: string): YamlDocumentResult[] {
  return splitDocuments(text).map((doc, i) => {
    const where = `document ${i + 1} (line ${doc.line})`;
    try {
      return { where, objects: loadAllYaml(doc.text, { filename: source }) as unknown[] };
    } catch (e) {
      return { where, error: describeYamlError(e, doc) };
    }
  });
}
