/**
 * The recorder's `/sessions/` page in real headless Chromium (Debian `chromium`, driven by
 * playwright-core): the list, a recorded session played by asciinema-player (served by the recorder
 * from the installed package), the typed command's output on the player's terminal (its DOM text),
 * a screenshot; a running session followed live; 401 without credentials and 403 for a caller
 * outside the viewer group.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { chromium, type Browser } from 'playwright-core';
import { DirectorySink } from '../../../src/recording/directory-sink.js';
import { TokenFileViewers, TokenTable, ReplicaAuth } from '../../../src/recording/recorder-auth.js';
import { startRecorder, type RunningRecorder } from '../../../src/recording/recorder-server.js';
import { RecorderSink } from '../../../src/recording/recorder-sink.js';
import { createRecordingMetrics } from '../../../src/recording/recording-metrics.js';
import { SessionRecording } from '../../../src/recording/session-recording.js';
import { newRecordingId, type RecordingSink } from '../../../src/recording/sink.js';
import { writeFileSync } from 'node:fs';

const CHROMIUM = '/usr/bin/chromium';

/**
 * Runs in the page: whether the player's terminal shows `needle`. A function, not a string: the
 * page's CSP (rightly) forbids string evaluation.
 */
function termIncludes(needle: string): boolean {
  const doc = (globalThis as unknown as { document: { querySelector(s: string): { textContent: string | null } | null } }).document;
  return (doc.querySelector('.ap-term')?.textContent ?? '').includes(needle);
}
/** The flags known to work on this machine class (docs: the machine's "Known to work"). */
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function record(sink: RecordingSink, lines: string[], finish = true, who: { user?: string; command?: string[] } = {}): Promise<SessionRecording> {
  const id = newRecordingId();
  const rec = new SessionRecording({
    identity: { sessionId: id, user: who.user ?? 'alice', namespace: 'default', pod: 'demo', subresource: 'exec', command: who.command ?? ['sh'], tty: true, record: 'output' },
    enforce: false,
    upload: await sink.open(id),
    sink: sink.kind,
    metrics: createRecordingMetrics(new Registry()),
    log: { warn: () => undefined },
    maxOutputBytes: 0,
  });
  rec.resize(80, 24);
  for (const l of lines) rec.output('stdout', Buffer.from(l));
  if (finish) {
    rec.exit({ exitCode: 0 });
    await rec.finish();
  }
  return rec;
}

describe('/sessions/ in headless Chromium', () => {
  it('finds Chromium', () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (scripts/provision-test-tools.sh installs it for npm test)`).toBe(true);
  });
  let work: string;
  let recorder: RunningRecorder;
  let browser: Browser;
  let recorded: SessionRecording;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ksp-rec-page-'));
    const dir = join(work, 'recordings');
    recorder = await startRecorder({
      dir,
      host: '127.0.0.1',
      port: 0,
      viewers: new TokenFileViewers(new TokenTable('viewer-token,carol,,"auditors"\nnosy-token,mallory,,"developers"\n', 'viewers.csv'), ['auditors']),
      replicas: new ReplicaAuth(new TokenTable('replica-token,proxy-0,\n', 'ingest.csv'), undefined),
      retentionMs: 0,
    });
    recorded = await record(new DirectorySink(dir), ['$ ', 'echo browser-$((6*7))\r\n', 'browser-42\r\n', '$ ']);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await recorder?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('lists the recording and plays it: the output is on the player terminal; screenshot', async () => {
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer viewer-token' }, viewport: { width: 1100, height: 800 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    const res = await page.goto(`${recorder.url}/sessions/`);
    expect(res?.status()).toBe(200);
    await page.waitForSelector(`tr[data-id="${recorded.id}"]`);
    expect(await page.textContent(`tr[data-id="${recorded.id}"]`)).toContain('default/demo');
    await page.click(`tr[data-id="${recorded.id}"]`);
    await page.waitForFunction(termIncludes, 'browser-42', { timeout: 20_000 });
    const terminal = (await page.textContent('.ap-term')) ?? '';
    expect(terminal).toContain('echo browser-$((6*7))');
    expect(terminal).toContain('browser-42');
    const shot = join(process.env.KSP_SCREENSHOT_DIR ?? work, 'sessions-page.png');
    await page.screenshot({ path: shot });
    expect(statSync(shot).size).toBeGreaterThan(5000);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('follows a running session live', async () => {
    writeFileSync(join(work, 'replica.token'), 'replica-token\n');
    const sink = new RecorderSink({ url: new URL(recorder.url), tokenFile: join(work, 'replica.token') });
    const running = await record(sink, ['$ ', 'echo live-one\r\n', 'live-one\r\n', '$ '], false);
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer viewer-token' } });
    const page = await context.newPage();
    await page.goto(`${recorder.url}/sessions/#${running.id}`);
    await page.waitForFunction(termIncludes, 'live-one', { timeout: 20_000 });
    expect(await page.textContent(`tr[data-id="${running.id}"]`)).toContain('live');
    running.output('stdout', Buffer.from('echo live-two\r\nlive-two\r\n$ '));
    await page.waitForFunction(termIncludes, 'live-two', { timeout: 20_000 });
    running.exit({ exitCode: 0 });
    await running.finish();
    await context.close();
  });

  it('caller-controlled values (user, command) show as text, never as markup or terminal controls (issue 31, finding 8)', async () => {
    const user = '<img src=x onerror="document.title=\'pwned\'">\u001b[2J';
    const command = ['sh', '-c', '<script>document.title="pwned"</script>\u009b31m\r'];
    const hostile = await record(new DirectorySink(join(work, 'recordings')), ['$ '], true, { user, command });
    const context = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer viewer-token' } });
    const page = await context.newPage();
    await page.goto(`${recorder.url}/sessions/`);
    const row = `tr[data-id="${hostile.id}"]`;
    await page.waitForSelector(row);
    const cells = await page.$$eval(`${row} td`, (tds) => tds.map((td) => ({ text: td.textContent, elements: td.children.length })));
    expect(cells[1]).toEqual({ text: user, elements: 0 });
    expect(cells[3]).toEqual({ text: command.join(' '), elements: 0 });
    expect(await page.$$(`${row} img, ${row} script`)).toEqual([]);
    expect(await page.title()).not.toBe('pwned');
    await context.close();
  });

  it('401 without credentials, 403 outside the viewer group (page, API, assets)', async () => {
    const anonymous = await browser.newContext();
    const p1 = await anonymous.newPage();
    expect((await p1.goto(`${recorder.url}/sessions/`))?.status()).toBe(401);
    await anonymous.close();
    const nosy = await browser.newContext({ extraHTTPHeaders: { authorization: 'Bearer nosy-token' } });
    const p2 = await nosy.newPage();
    const res = await p2.goto(`${recorder.url}/sessions/`);
    expect(res?.status()).toBe(403);
    expect(await p2.textContent('body')).not.toContain('browser-42');
    expect((await p2.goto(`${recorder.url}/api/v1/sessions/${recorded.id}/cast`))?.status()).toBe(403);
    await nosy.close();
  });
});
