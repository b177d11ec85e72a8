/**
 * How `serve`, `demo` and `agent` write their logs: JSON lines (pino's, one object a line) for a pod
 * or anything that is not a terminal, human lines (pino-pretty) on a terminal. `--logging-format`
 * (kube-apiserver's flag: `text` or `json`; `--log-format` is accepted too) overrides the guess, and
 * `--log-level` (pino's levels) sets what is written. pino-pretty is loaded only for text output.
 */
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';
import { ConfigError } from './errors.js';

/** `--logging-format`. */
export type LogFormat = 'text' | 'json';

/** pino's levels, for `--log-level`. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The logging flags as given. */
export interface LoggingFlags {
  format?: string;
  level?: string;
}

/** The logging settings, validated. */
export interface Logging {
  format: LogFormat;
  level: LogLevel;
}

/** Validate the flags; the format defaults to `text` on a terminal, `json` elsewhere. Throws ConfigError. */
export function parseLogging(flags: LoggingFlags, out: { isTTY?: boolean } = process.stdout): Logging {
  const format = flags.format ?? (out.isTTY ? 'text' : 'json');
  if (format !== 'text' && format !== 'json') throw new ConfigError(`--logging-format: want text or json, got ${JSON.stringify(flags.format)}`);
  const level = flags.level ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new ConfigError(`--log-level: want one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  return { format, level: level as LogLevel };
}

/** A pino (Fastify `logger`) option writing to `stream` in the chosen format. */
export function loggerOptions(logging: Logging, stream: Writable & { isTTY?: boolean } = process.stdout): { level: LogLevel; stream: Writable } {
  if (logging.format === 'json') return { level: logging.level, stream };
  const pretty = createRequire(import.meta.url)('pino-pretty') as (o: object) => Writable;
  return {
    level: logging.level,
    stream: pretty({
      destination: stream,
      sync: true,
      colorize: stream.isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,reqId',
      singleLine: true,
    }),
  };
}

/** One line of the agent's own logger in the chosen format (the agent logs without pino). */
export function formatAgentLine(logging: Logging, level: 30 | 40, obj: object, msg: string): string {
  if (logging.format === 'json') return JSON.stringify({ level, time: Date.now(), name: 'agent', msg, ...obj }) + '\n';
  const time = new Date().toTimeString().slice(0, 8);
  const fields = Object.entries(obj).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
  return `[${time}] ${level === 40 ? 'WARN' : 'INFO'} (agent): ${msg}${fields ? ` ${fields}` : ''}\n`;
}
