/**
 * `kube-stream-proxy sessions list|play|export|verify`: recorded sessions from a recordings
 * directory (`--dir D`: the directory sink's or the recorder's) or from a recorder (`--recorder URL`
 * with a viewer token, `--token-file`). A recording's id is its file name without `.cast`, the id
 * the audit line carries.
 *
 * What a recording says about itself (user, pod, container, command: caller-controlled text) is
 * printed with its terminal controls escaped (`terminal-escape.ts`), in the table, in `-o json`
 * (DEL and C1 as `\u00HH`), in `verify` lines and in error messages; `play` and `export` write the
 * recorded session itself, which is their point. A badly typed entry (an old or foreign recorder)
 * is printed as well as it can be, never a crash.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseGoDuration } from '../config.js';
import { playCast } from './cast-player.js';
import { parseRecorderUrl, recorderFetch, type RecorderEndpoint } from './recorder-client.js';
import { RecordingStore, type RecordingEntry } from './recording-store.js';
import { isRecordingId } from './sink.js';
import { escapeJsonControls, escapeTerminal } from './terminal-escape.js';

export const SESSIONS_USAGE = `kube-stream-proxy sessions: recorded exec/attach/port-forward sessions (docs/recording.md).

Usage:
  kube-stream-proxy sessions list   [--dir D | --recorder URL] [--user U] [--pod P] [--since T] [-o json]
  kube-stream-proxy sessions play   ID [--dir D | --recorder URL] [--speed N] [--idle-time-limit S]
  kube-stream-proxy sessions export ID [--dir D | --recorder URL]      (the .cast on stdout)
  kube-stream-proxy sessions verify [ID] [--dir D]                     (sha256 of each cast against its index entry)

Flags:
  --dir D               A recordings directory (default ./.kube-stream-proxy/recordings).
  --recorder URL        A recorder (kube-stream-proxy recorder) instead of a directory.
  --token-file PATH     Bearer token for --recorder.
  --ca-file PATH        CA bundle to verify an https recorder.
  --user U, --pod P     list: only these.
  --since T             list: started at or after T (RFC 3339, or a duration such as 24h: that long ago).
  -o json               list: JSON lines instead of a table.
  --speed N             play: speed factor (default 1).
  --idle-time-limit S   play: longest pause in seconds (default: the recording's, else none).
  -h, --help            Show this help.
`;

/** The default directory (`npm start` records there). */
export const DEFAULT_RECORDINGS_DIR = '.kube-stream-proxy/recordings';

/** Where recordings are read from. */
type Source = { kind: 'dir'; store: RecordingStore } | { kind: 'recorder'; ep: RecorderEndpoint };

function human(n: number): string {
  if (n < 1024) return `${n}B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)}KiB`;
  return `${(n / 1024 / 1024).toFixed(1)}MiB`;
}

/** Any value as one line of text for a table cell: strings as they are, anything else as JSON; controls escaped. */
function cell(v: unknown, absent = ''): string {
  const text = typeof v === 'string' ? v : v === undefined || v === null ? absent : (JSON.stringify(v) ?? absent);
  return escapeTerminal(text);
}

function words(v: unknown): string {
  return Array.isArray(v) ? v.map((w) => cell(w)).join(' ') : cell(v);
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** The list as a table (pure; every value escaped, any type tolerated). */
export function formatSessionTable(entries: readonly RecordingEntry[]): string {
  const rows = [['ID', 'USER', 'CLUSTER/NAMESPACE/POD', 'COMMAND', 'START', 'DURATION', 'EXIT', 'BYTES', 'RESULT']];
  for (const e of entries) {
    const where = `${cell(e.cluster, '-')}/${cell(e.namespace)}/${cell(e.pod)}${e.container ? `/${cell(e.container)}` : ''}`;
    const what = e.subresource === 'exec' ? words(e.command ?? []) : e.subresource === 'portforward' ? `port-forward ${words(e.ports ?? [])}` : cell(e.subresource);
    const bytes = e.record === 'metadata' ? `${human(count(e.bytesToUpstream))}↑ ${human(count(e.bytesToClient))}↓` : human(count(e.recordedBytes));
    const finished = e.state !== 'open' && e.state !== 'invalid';
    rows.push([
      cell(e.id),
      cell(e.user, '(unknown)'),
      where,
      [...what].length > 40 ? `${[...what].slice(0, 39).join('')}…` : what,
      cell(e.start).replace(/\.\d+Z$/, 'Z'),
      e.state === 'open' ? 'running' : finished && typeof e.durationSeconds === 'number' ? `${e.durationSeconds.toFixed(1)}s` : '-',
      typeof e.exitCode === 'number' && finished ? String(e.exitCode) : '-',
      bytes,
      finished ? cell(e.result) : cell(e.state),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...r[i]!].length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i]! - [...c].length))).join('  ')).join('\n') + '\n';
}

function parseSince(text: string, nowMs: number): number {
  const t = Date.parse(text);
  if (!Number.isNaN(t) && /^\d{4}-/.test(text)) return t;
  return nowMs - parseGoDuration(text);
}

async function listFrom(src: Source, filter: { user?: string; pod?: string; sinceMs?: number }): Promise<RecordingEntry[]> {
  let entries: RecordingEntry[];
  if (src.kind === 'dir') entries = await src.store.list();
  else {
    const a = await recorderFetch(src.ep, 'GET', '/api/v1/sessions');
    if (a.status !== 200) throw new Error(`recorder answered ${a.status}: ${a.body.toString().slice(0, 200)}`);
    entries = (JSON.parse(a.body.toString()) as { items: RecordingEntry[] }).items;
  }
  return entries.filter(
    (e) => (filter.user === undefined || e.user === filter.user) && (filter.pod === undefined || e.pod === filter.pod) && (filter.sinceMs === undefined || Date.parse(e.start) >= filter.sinceMs),
  );
}

async function castOf(src: Source, id: string): Promise<string> {
  if (!isRecordingId(id)) throw new Error(`not a recording id: ${JSON.stringify(id)}`);
  if (src.kind === 'dir') return readFile(src.store.castPath(id), 'utf8');
  const a = await recorderFetch(src.ep, 'GET', `/api/v1/sessions/${id}/cast`);
  if (a.status !== 200) throw new Error(`recorder answered ${a.status}: ${a.body.toString().slice(0, 200)}`);
  return a.body.toString('utf8');
}

/** Run `sessions …`; resolves with the exit code. */
export async function sessionsCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        dir: { type: 'string' },
        recorder: { type: 'string' },
        'token-file': { type: 'string' },
        'ca-file': { type: 'string' },
        user: { type: 'string' },
        pod: { type: 'string' },
        since: { type: 'string' },
        output: { type: 'string', short: 'o' },
        speed: { type: 'string' },
        'idle-time-limit': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
  } catch (e) {
    process.stderr.write(`${escapeTerminal(`kube-stream-proxy sessions: ${(e as Error).message}`)}\n\n${SESSIONS_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [sub, id] = positionals;
  if (values.help || sub === undefined) {
    process.stdout.write(SESSIONS_USAGE);
    return values.help ? 0 : 2;
  }
  const fail = (msg: string, code = 2): number => {
    process.stderr.write(escapeTerminal(`kube-stream-proxy sessions ${sub}: ${msg}`) + '\n');
    return code;
  };
  if (values.dir !== undefined && values.recorder !== undefined) return fail('give --dir or --recorder, not both');
  let src: Source;
  try {
    src =
      values.recorder !== undefined
        ? {
            kind: 'recorder',
            ep: {
              url: parseRecorderUrl(values.recorder, '--recorder'),
              ...(values['token-file'] ? { tokenFile: values['token-file'] } : {}),
              ...(values['ca-file'] ? { caFile: values['ca-file'] } : {}),
            },
          }
        : { kind: 'dir', store: new RecordingStore(values.dir ?? DEFAULT_RECORDINGS_DIR) };
  } catch (e) {
    return fail((e as Error).message);
  }
  try {
    switch (sub) {
      case 'list': {
        const entries = await listFrom(src, {
          ...(values.user !== undefined ? { user: values.user } : {}),
          ...(values.pod !== undefined ? { pod: values.pod } : {}),
          ...(values.since !== undefined ? { sinceMs: parseSince(values.since, Date.now()) } : {}),
        });
        if (values.output === 'json') process.stdout.write(entries.map((e) => escapeJsonControls(JSON.stringify(e)) + '\n').join(''));
        else if (values.output !== undefined) return fail(`-o: only json is supported`);
        else process.stdout.write(formatSessionTable(entries));
        return 0;
      }
      case 'play': {
        if (id === undefined) return fail('which recording? sessions play ID');
        const speed = values.speed === undefined ? 1 : Number(values.speed);
        if (!(speed > 0)) return fail(`--speed: must be a number > 0, not ${JSON.stringify(values.speed)}`);
        const idle = values['idle-time-limit'] === undefined ? undefined : Number(values['idle-time-limit']);
        if (idle !== undefined && !(idle > 0)) return fail(`--idle-time-limit: must be seconds > 0, not ${JSON.stringify(values['idle-time-limit'])}`);
        const cast = await castOf(src, id);
        await playCast(cast, (t) => process.stdout.write(t), { speed, ...(idle !== undefined ? { idleTimeLimit: idle } : {}) });
        return 0;
      }
      case 'export': {
        if (id === undefined) return fail('which recording? sessions export ID');
        process.stdout.write(await castOf(src, id));
        return 0;
      }
      case 'verify': {
        if (src.kind !== 'dir') return fail('verify reads the directory itself: give --dir (the recorder hashes what it stores)');
        const ids = id !== undefined ? [id] : (await src.store.list()).map((e) => e.id);
        let bad = 0;
        for (const one of ids) {
          const r = await src.store.verify(one);
          if (!r.ok) bad++;
          process.stdout.write(escapeTerminal(`${r.ok ? 'OK      ' : 'FAILED  '}${one}  ${r.message}`) + '\n');
        }
        return bad === 0 ? 0 : 1;
      }
      default:
        fail(`unknown subcommand ${JSON.stringify(sub)}`);
        process.stderr.write(`\n${SESSIONS_USAGE}`);
        return 2;
    }
  } catch (e) {
    return fail((e as Error).message, 1);
  }
}
