/**
 * Parsing `HOST:PORT` listen flags (`127.0.0.1:6443`, `[::1]:0`, `:8443`).
 */

/** A parsed listen address. */
export interface HostPort {
  host: string;
  port: number;
}

/** Parse `HOST:PORT`; an empty host means all interfaces. Throws a clear Error on bad input. */
export function parseHostPort(value: string): HostPort {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value);
  if (!m) throw new Error(`invalid listen address "${value}": want HOST:PORT`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`invalid listen address "${value}": port out of range`);
  const host = m[1] ?? m[2] ?? '';
  return { host: host === '' ? '0.0.0.0' : host, port };
}
