/**
 * The CPU benchmark's pieces that need no cluster: /proc/PID/stat parsing, the process-tree CPU
 * sample (a busy child's CPU is counted in its parent's tree, live or reaped), the generated section of
 * docs/benchmarks.md (rendered, replaced in place, appended when missing), and the check that a
 * proxy's WebSocket sessions went its row's way (translated by the proxy, or passed through).
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { CPU_BEGIN, CPU_END, CPU_RELAYS, checkWebSocketWay, cpuMarkdownSection, cpuTextTable, replaceCpuSection, type CpuRow } from '../../bench/cpu.js';
import { parseProcStat, sampleTreeCpu } from '../../bench/proc-cpu.js';

const rows: CpuRow[] = [
  { relay: 'direct (dev cluster, SPDY)', key: 'direct', measurement: 'stdout', bytes: 300_000_000, wallMs: [1000, 1200, 1100], wallRatio: 1 },
  {
    relay: 'bare Node relay (net + pipe())',
    key: 'bare',
    measurement: 'stdout',
    bytes: 300_000_000,
    wallMs: [1500, 1400, 1600],
    cpuSeconds: [0.2, 0.21, 0.19],
    cpuPerGB: 0.6667,
    cpuRatioToBare: 1,
    wallRatio: 0.733,
  },
  { relay: 'socat (read/write)', key: 'socat', measurement: 'stdout', bytes: 300_000_000, wallMs: [], absent: 'socat is not installed (apt-get install -y -o DPkg::Lock::Timeout=300 socat)' },
];

describe('bench --cpu pieces', () => {
  it('parses /proc/PID/stat with a command name holding spaces and parentheses', () => {
    const line = '1234 (a (b) c) S 77 1234 1234 0 -1 4194304 1 0 0 0 150 25 7 3 20 0 1 0 100 1000 10 0';
    expect(parseProcStat(line)).toEqual({ pid: 1234, ppid: 77, ticks: 150 + 25 + 7 + 3 });
  });

  /** Poll the tree of `root` until `ok(sample)` or 30 s. */
  async function waitForTree(root: number, ok: (s: ReturnType<typeof sampleTreeCpu>) => boolean): Promise<ReturnType<typeof sampleTreeCpu>> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const s = sampleTreeCpu(root);
      if (ok(s) || Date.now() > deadline) return s;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  // Spins until it has used 300 ms of CPU itself (not wall time: the machine may be busy).
  const SPIN = `"${process.execPath}" -e "while (process.cpuUsage().user < 300000);"`;

  it('counts a live busy child in its parent tree', async () => {
    const sh = spawn('sh', ['-c', `${SPIN} && sleep 5 && true`], { stdio: 'ignore' });
    try {
      const s = await waitForTree(sh.pid!, (t) => t.seconds >= 0.2);
      expect(s.seconds).toBeGreaterThanOrEqual(0.2);
    } finally {
      sh.kill('SIGKILL');
    }
  }, 40_000);

  it('counts an exited child through its parent\'s cutime', async () => {
    // sh runs the spinner, reaps it, then becomes `sleep` (exec keeps the cutime): one process left.
    const sh = spawn('sh', ['-c', `${SPIN}; exec sleep 5`], { stdio: 'ignore' });
    try {
      const s = await waitForTree(sh.pid!, (t) => t.pids.length === 1 && t.seconds >= 0.2);
      expect(s.pids).toEqual([sh.pid]);
      expect(s.seconds).toBeGreaterThanOrEqual(0.2);
    } finally {
      sh.kill('SIGKILL');
    }
  }, 40_000);

  it('renders the CPU table and replaces the generated section in place', () => {
    const text = cpuTextTable(rows).split('\n');
    expect(text).toHaveLength(5);
    expect(text[3]).toMatch(/^bare Node relay \(net \+ pipe\(\)\)\s+stdout\s+300 MB\s+3\s+0\.67\s+1\.00\s+0\.73\s+0\.20, 0\.21, 0\.19\s+1500, 1400, 1600$/);
    expect(text[4]).toContain('absent');
    const section = cpuMarkdownSection(rows, { machine: '2 CPUs', loadAverage: '1.00', commandLine: 'node dist/bench/run.js --cpu --write', date: new Date('2026-01-02T03:04:05Z') });
    expect(section.startsWith(CPU_BEGIN) && section.endsWith(CPU_END)).toBe(true);
    expect(section).toContain('| bare Node relay (net + pipe()) | stdout | 300 MB | 3 | 0.67 | 1.00 | 0.73 | 0.20, 0.21, 0.19 | 1500, 1400, 1600 |');
    expect(section).toContain('| socat (read/write) | stdout | 300 MB | 0 | absent |');
    const page = `# B\n\nintro\n\n${CPU_BEGIN}\nold\n${CPU_END}\n\nafter\n`;
    expect(replaceCpuSection(page, section)).toBe(`# B\n\nintro\n\n${section}\n\nafter\n`);
    expect(replaceCpuSection('# B\n', section)).toBe(`# B\n\n${section}\n`);
  });

  it('adds the agent columns when a row went through an agent tunnel', () => {
    const agentRow: CpuRow = {
      relay: 'via agent tunnel: passthrough (SPDY)',
      key: 'agent-spdy',
      measurement: 'stdout',
      bytes: 300_000_000,
      wallMs: [2000, 2100, 1900],
      cpuSeconds: [0.5, 0.6, 0.55],
      cpuPerGB: 1.8333,
      agentCpuSeconds: [0.4, 0.45, 0.42],
      agentCpuPerGB: 1.4,
      wallRatio: 0.55,
    };
    const text = cpuTextTable([...rows, agentRow]).split('\n');
    expect(text[0]).toMatch(/wall ms \(each round\)\s+agent CPU-s per GB\s+agent CPU-s \(each round\)$/);
    expect(text[5]).toMatch(/^via agent tunnel: passthrough \(SPDY\)\s+stdout\s+300 MB\s+3\s+1\.83\s+0\.55\s+0\.50, 0\.60, 0\.55\s+2000, 2100, 1900\s+1\.40\s+0\.40, 0\.45, 0\.42$/);
    const section = cpuMarkdownSection([...rows, agentRow], { machine: '2 CPUs', loadAverage: '1.00', commandLine: 'node dist/bench/run.js --cpu', date: new Date('2026-01-02T03:04:05Z') });
    expect(section).toContain('|---|---|---:|---:|---:|---:|---:|---|---|---:|---|');
    expect(section).toContain('| via agent tunnel: passthrough (SPDY) | stdout | 300 MB | 3 | 1.83 |  | 0.55 | 0.50, 0.60, 0.55 | 2000, 2100, 1900 | 1.40 | 0.40, 0.45, 0.42 |');
    // Rows without an agent leave the agent cells empty.
    expect(section).toContain('| 0.20, 0.21, 0.19 | 1500, 1400, 1600 |  |  |');
  });

  it('adds the agent\'s callgrind column beside the relay\'s when agent rows ran under callgrind', () => {
    const agentRow: CpuRow = {
      relay: 'via agent tunnel: passthrough (SPDY)',
      key: 'agent-spdy',
      measurement: 'stdin',
      bytes: 20_000_000,
      wallMs: [9000],
      cpuSeconds: [4],
      cpuPerGB: 200,
      agentCpuSeconds: [5],
      agentCpuPerGB: 250,
      irPerMB: 3_460_000,
      agentIrPerMB: 10_020_000,
    };
    const bare: CpuRow = { ...rows[1]!, irPerMB: 2_670_000 };
    const text = cpuTextTable([bare, agentRow]).split('\n');
    expect(text[0]).toMatch(/agent CPU-s \(each round\)\s+M instructions per MB \(callgrind\)\s+agent M instructions per MB \(callgrind\)$/);
    expect(text[3]).toMatch(/\s5\.00\s+3\.46\s+10\.02$/);
    expect(text[2]).toMatch(/1500, 1400, 1600\s+2\.67$/);
    const section = cpuMarkdownSection([bare, agentRow], { machine: '2 CPUs', loadAverage: '1.00', commandLine: 'node dist/bench/run.js --cpu --callgrind', date: new Date('2026-01-02T03:04:05Z') });
    expect(section).toContain('|---|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|');
    expect(section).toContain('| 250.00 | 5.00 | 3.46 | 10.02 |');
  });

  it('the translation rows run --upstream-streaming spdy and the WebSocket passthrough rows the default; each checks its way on /metrics', async () => {
    const relay = (key: string) => CPU_RELAYS.find((r) => r.key === key)!;
    for (const key of ['translation', 'tunnel', 'translation-nofloor', 'translation-cli-floor', 'agent']) {
      expect(relay(key).websocketWay, key).toBe('translated');
      expect(relay(key).name, key).toContain('--upstream-streaming spdy');
    }
    for (const key of ['websocket-passthrough', 'agent-websocket']) expect(relay(key).websocketWay, key).toBe('passthrough');
    expect(relay('websocket-passthrough').env).toEqual({
      stdout: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
      stdin: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'true' },
      'port-forward': { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'true' },
    });
    // A proxy's /metrics as it reads after the warm-up of a WebSocket-passthrough row, and of a translated one.
    const counts = (exec: string, pf: string): string =>
      `apiserver_websocket_streaming_requests_total{subresource="exec",proxy_type="${exec}"} 2\n` +
      `apiserver_websocket_streaming_requests_total{subresource="portforward",proxy_type="${pf}"} 1\n`;
    let body = counts('proxied_to_upstream', 'proxied_to_upstream');
    const server: Server = createServer((req, res) => res.end(req.url === '/metrics' ? body : ''));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const proc = { url, pid: 0, close: async () => {} };
      await expect(checkWebSocketWay(relay('websocket-passthrough'), proc)).resolves.toBeUndefined();
      await expect(checkWebSocketWay(relay('translation'), proc)).rejects.toThrow(/exec WebSocket sessions were to be translated by the proxy; its \/metrics counts \{"passedThrough":2,"translated":0\}/);
      // An agent relay's /metrics is its proxy's (its url is …/clusters/bench).
      await expect(checkWebSocketWay(relay('agent-websocket'), { ...proc, url: `${url}/clusters/bench`, proxy: proc, agent: proc })).resolves.toBeUndefined();
      body = counts('translated_at_apiserver', 'tunneled_at_apiserver');
      await expect(checkWebSocketWay(relay('translation'), proc)).resolves.toBeUndefined();
      await expect(checkWebSocketWay(relay('tunnel'), proc)).resolves.toBeUndefined();
      await expect(checkWebSocketWay(relay('websocket-passthrough'), proc)).rejects.toThrow(/were to be passed through/);
      // SPDY rows check nothing.
      await expect(checkWebSocketWay(relay('passthrough'), proc)).resolves.toBeUndefined();
    } finally {
      server.close();
    }
  });
});
