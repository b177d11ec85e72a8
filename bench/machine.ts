/**
 * A description of the machine a benchmark ran on (for the report header).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';

/** Where the numbers came from. */
export interface MachineInfo {
  /** Usable CPUs (what `nproc` prints). */
  nproc: number;
  /** "model name" from /proc/cpuinfo (falls back to os.cpus()). */
  cpuModel: string;
  nodeVersion: string;
  platform: string;
}

/** Describe the current machine. */
export function machineInfo(): MachineInfo {
  let cpuModel = cpus()[0]?.model ?? 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m?.[1]) cpuModel = m[1].trim();
  } catch {
    // Not Linux: keep os.cpus().
  }
  return { nproc: availableParallelism(), cpuModel, nodeVersion: process.version, platform: `${process.platform}/${process.arch}` };
}
