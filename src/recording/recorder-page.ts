/**
 * The recorder's web page, `/sessions/`: the list of recordings and a player (npm
 * `asciinema-player` 3.17, its bundle served from the installed package by the recorder itself — no
 * CDN), with read-only live following of running sessions through the player's EventSource driver.
 *
 * The page is static; its script (`/sessions/assets/page.js`, no inline script) reads the JSON API
 * with the browser's own credentials and writes recording metadata only through `textContent` (a
 * pod name or a command is caller-controlled text: it shows as text, never as markup). An entry
 * whose index entry is invalid (`state: invalid`) is listed as such. The Content-Security-Policy allows scripts from
 * the recorder only, plus `wasm-unsafe-eval` for the player's inlined terminal emulator.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The Content-Security-Policy of the page and its assets. */
export const PAGE_CSP = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>Session recordings — kube-stream-proxy</title>
<link rel="stylesheet" href="/sessions/assets/asciinema-player.css">
<link rel="stylesheet" href="/sessions/assets/page.css">
</head>
<body>
<h1>Session recordings</h1>
<p id="status">Loading…</p>
<table id="sessions" hidden>
<thead><tr><th>Start</th><th>User</th><th>Cluster/namespace/pod</th><th>Command</th><th>Duration</th><th>Exit</th><th>Bytes</th><th>State</th></tr></thead>
<tbody></tbody>
</table>
<section id="viewer" hidden>
<h2 id="viewer-title"></h2>
<div id="player"></div>
</section>
<script src="/sessions/assets/asciinema-player.min.js"></script>
<script src="/sessions/assets/page.js"></script>
</body>
</html>
`;

const PAGE_CSS = `body { font-family: system-ui, sans-serif; margin: 1.5rem; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { text-align: left; padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; }
tbody tr { cursor: pointer; }
tbody tr:hover { background: #f3f3f3; }
tr.live td:last-child { color: #b00; font-weight: bold; }
#viewer { margin-top: 1.5rem; max-width: 960px; }
`;

const PAGE_JS = `'use strict';
(function () {
  const api = '/api/v1/sessions';
  const status = document.getElementById('status');
  const table = document.getElementById('sessions');
  const tbody = table.querySelector('tbody');
  let player;
  function cell(tr, text) { const td = document.createElement('td'); td.textContent = text; tr.appendChild(td); }
  function where(s) { return [s.cluster || '', s.namespace, s.pod + (s.container ? '/' + s.container : '')].join('/').replace(/^\\//, ''); }
  function what(s) { return s.subresource === 'exec' ? (s.command || []).join(' ') : s.subresource + (s.ports ? ' ' + s.ports.join(',') : ''); }
  function open(s) {
    if (s.record === 'metadata') return;
    if (player) player.dispose();
    document.getElementById('viewer').hidden = false;
    document.getElementById('viewer-title').textContent = where(s) + ': ' + what(s) + (s.state === 'open' ? ' (live)' : '');
    const el = document.getElementById('player');
    el.textContent = '';
    const id = encodeURIComponent(s.id);
    const src = s.state === 'open' ? { driver: 'eventsource', url: api + '/' + id + '/live' } : api + '/' + id + '/cast';
    player = AsciinemaPlayer.create(src, el, { autoPlay: true, idleTimeLimit: 2, fit: 'width' });
    history.replaceState(null, '', '#' + s.id);
  }
  fetch(api, { credentials: 'same-origin' }).then(function (r) {
    if (!r.ok) throw new Error(r.status === 403 ? 'Forbidden: you may not list session recordings.' : 'HTTP ' + r.status);
    return r.json();
  }).then(function (list) {
    const items = list.items.slice().reverse();
    status.textContent = items.length + ' recording' + (items.length === 1 ? '' : 's');
    for (const s of items) {
      const tr = document.createElement('tr');
      tr.dataset.id = s.id;
      if (s.state === 'open') tr.className = 'live';
      cell(tr, s.start); cell(tr, s.user || '(unknown)'); cell(tr, where(s)); cell(tr, what(s));
      cell(tr, s.state === 'finished' && typeof s.durationSeconds === 'number' ? s.durationSeconds.toFixed(1) + ' s' : '');
      cell(tr, s.state === 'finished' && typeof s.exitCode === 'number' ? String(s.exitCode) : '');
      cell(tr, String(s.recordedBytes !== undefined ? s.recordedBytes : (s.bytesToUpstream || 0) + (s.bytesToClient || 0)));
      cell(tr, s.state === 'open' ? 'live' : s.state === 'invalid' ? 'invalid index entry' : s.result);
      tr.addEventListener('click', function () { open(s); });
      tbody.appendChild(tr);
    }
    table.hidden = false;
    const wanted = location.hash.slice(1);
    const first = items.find(function (s) { return s.id === wanted; });
    if (first) open(first);
  }).catch(function (e) { status.textContent = e.message; });
})();
`;

/** One static asset. */
export interface PageAsset {
  type: string;
  body: Buffer;
}

const require = createRequire(import.meta.url);
let assets: Map<string, PageAsset> | undefined;

/** The page and its assets by path (read once from the installed `asciinema-player`). */
export function pageAssets(): Map<string, PageAsset> {
  if (assets) return assets;
  const bundle = (f: string): Buffer => readFileSync(require.resolve(`asciinema-player/dist/bundle/${f}`));
  assets = new Map<string, PageAsset>([
    ['/sessions/', { type: 'text/html; charset=utf-8', body: Buffer.from(PAGE_HTML) }],
    ['/sessions/assets/page.js', { type: 'text/javascript; charset=utf-8', body: Buffer.from(PAGE_JS) }],
    ['/sessions/assets/page.css', { type: 'text/css; charset=utf-8', body: Buffer.from(PAGE_CSS) }],
    ['/sessions/assets/asciinema-player.min.js', { type: 'text/javascript; charset=utf-8', body: bundle('asciinema-player.min.js') }],
    ['/sessions/assets/asciinema-player.css', { type: 'text/css; charset=utf-8', body: bundle('asciinema-player.css') }],
  ]);
  return assets;
}
