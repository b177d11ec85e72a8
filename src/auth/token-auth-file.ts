/**
 * kube-apiserver's `--token-auth-file` format (k8s.io/apiserver `pkg/authentication/token/tokenfile`):
 * a CSV file of `token,user,uid[,"group1,group2"]`, read as Go's `encoding/csv` reads it. Pure. Used
 * by the session recorder's viewer tokens and by the dev cluster's static token authentication.
 */

/** One user of the file. */
export interface TokenFileUser {
  name: string;
  uid?: string;
  groups: string[];
}

/** A token file that cannot be used (kube-apiserver refuses to start with it). */
export class TokenAuthFileError extends Error {
  override readonly name = 'TokenAuthFileError';
  readonly code = 'KSP_ERR_BAD_TOKEN_FILE' as const;
}

/**
 * Split CSV text into records as Go's `encoding/csv` reader does with `FieldsPerRecord = -1`:
 * comma-separated, `"…"` quoting with `""` for a quote, quoted fields may span lines, blank lines
 * skipped, no trimming. Throws on a bare quote inside an unquoted field or an unterminated quote.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let started = false; // the current field has content or an opening quote
  let line = 1;
  let i = 0;
  const pushField = (): void => {
    record.push(field);
    field = '';
    started = false;
  };
  const endLine = (): void => {
    if (record.length === 0 && !started) return; // a blank line
    pushField();
    records.push(record);
    record = [];
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"' && !started) {
      started = true;
      i++;
      for (;;) {
        if (i >= text.length) throw new TokenAuthFileError(`line ${line}: extraneous or missing " in quoted-field`);
        const q = text[i++]!;
        if (q !== '"') {
          if (q === '\n') line++;
          field += q;
        } else if (text[i] === '"') {
          field += '"';
          i++;
        } else {
          break;
        }
      }
      const next = text[i];
      if (next !== undefined && next !== ',' && next !== '\n' && !(next === '\r' && text[i + 1] === '\n')) {
        throw new TokenAuthFileError(`line ${line}: extraneous or missing " in quoted-field`);
      }
    } else if (c === '"') {
      throw new TokenAuthFileError(`line ${line}: bare " in non-quoted-field`);
    } else if (c === ',') {
      pushField();
      i++;
    } else if (c === '\n' || (c === '\r' && text[i + 1] === '\n')) {
      i += c === '\r' ? 2 : 1;
      endLine();
      line++;
    } else {
      field += c;
      started = true;
      i++;
    }
  }
  endLine();
  return records;
}

/**
 * Parse a token file. Rules of `tokenfile.NewCSV`: at least 3 columns, an empty token is skipped, a
 * later duplicate wins, the 4th column is split on `,` into groups (empty names are dropped here).
 */
export function parseTokenAuthFile(text: string, path = 'token file'): Map<string, TokenFileUser> {
  const tokens = new Map<string, TokenFileUser>();
  for (const record of parseCsv(text)) {
    if (record.length < 3) {
      throw new TokenAuthFileError(
        `token file '${path}' must have at least 3 columns (token, user name, user uid), found ${record.length}`,
      );
    }
    const [token, name, uid] = record as [string, string, string];
    if (token === '') continue;
    const groups = record.length >= 4 ? record[3]!.split(',').filter((g) => g !== '') : [];
    tokens.set(token, uid === '' ? { name, groups } : { name, uid, groups });
  }
  return tokens;
}

