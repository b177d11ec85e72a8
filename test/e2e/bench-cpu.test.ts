/**
 * The CPU-per-byte benchmark in quick mode (20 MB, one round): every relay × measurement has a row;
 * a relay that is measured has a positive wall time and (except the direct path) a positive, finite
 * CPU-s per GB; nginx/HAProxy/socat rows are either measured or marked absent with the apt-get
 * command (the test never installs them). Each proxy's WebSocket sessions went its row's way (the
 * translation rows through the proxy's translator, `--upstream-streaming spdy`; the WebSocket
 * passthrough rows passed through to the dev cluster's 1.36 API): runCpuBenchmarks checks its
 * `/metrics` after the warm-up and throws otherwise. It checks the harness works, not the targets.
 */
import { describe, expect, it } from 'vitest';
import { CPU_QUICK, CPU_RELAYS, cpuTextTable, runCpuBenchmarks } from '../../bench/cpu.js';
import { findBinary } from '../../bench/debian-package.js';
import { kubectlE2eSkipReason } from '../helpers/kubectl.js';

describe.skipIf(kubectlE2eSkipReason() !== undefined)('bench --cpu --quick', () => {
  it('measures relay CPU per GB for every relay and measurement', async () => {
    const rows = await runCpuBenchmarks({ ...CPU_QUICK, install: false, log: (l) => console.log(l) });
    console.log(cpuTextTable(rows));
    const expected = CPU_RELAYS.flatMap((r) => (['stdout', 'stdin', 'port-forward'] as const).filter((m) => r.env[m]).map((m) => `${r.key} ${m}`));
    expect(rows.map((r) => `${r.key} ${r.measurement}`).sort()).toEqual(expected.sort());
    for (const r of rows) {
      const label = `${r.relay} ${r.measurement}`;
      if (r.absent) {
        expect(['nginx', 'haproxy', 'socat'], label).toContain(r.key);
        expect(findBinary(r.key), label).toBeUndefined();
        expect(r.absent, label).toContain('apt-get install -y -o DPkg::Lock::Timeout=300');
        continue;
      }
      expect(r.wallMs, label).toHaveLength(CPU_QUICK.rounds);
      expect(r.wallMs[0]! > 0, label).toBe(true);
      expect(Number.isFinite(r.wallRatio ?? NaN), `${label}: wall ratio`).toBe(true);
      if (r.key === 'direct') {
        expect(r.cpuPerGB, label).toBeUndefined();
        continue;
      }
      // 20 MB through a relay that copies in user space costs at least one 10 ms clock tick of its CPU.
      // The passthrough's splice(2) path (SPDY and WebSocket alike: both are byte passthroughs) and
      // HAProxy's splice-auto move it inside the kernel, at ~0.2 CPU-s/GB: ~4 ms for 20 MB, which may
      // round to 0 ticks. Those only need a finite figure.
      const inKernel = r.key === 'passthrough' || r.key === 'websocket-passthrough' || r.key === 'haproxy';
      expect(Number.isFinite(r.cpuPerGB ?? NaN) && (inKernel ? r.cpuPerGB! >= 0 : r.cpuPerGB! > 0), `${label}: CPU-s/GB ${r.cpuPerGB}`).toBe(true);
      // Through an agent both processes copy every byte in user space (HTTP/2 DATA frames): each
      // has a CPU figure of its own; every other relay has no agent.
      if (r.key === 'agent' || r.key === 'agent-spdy' || r.key === 'agent-websocket') {
        expect(r.agentCpuSeconds, label).toHaveLength(CPU_QUICK.rounds);
        expect(Number.isFinite(r.agentCpuPerGB ?? NaN) && r.agentCpuPerGB! > 0, `${label}: agent CPU-s/GB ${r.agentCpuPerGB}`).toBe(true);
      } else expect(r.agentCpuPerGB, label).toBeUndefined();
    }
  }, 240_000);
});
