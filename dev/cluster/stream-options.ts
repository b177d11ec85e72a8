/**
 * The query of pods/exec, pods/attach and pods/portforward, parsed and validated as the apiserver
 * and the kubelet do before any upgrade. Every function returns either the options or the 4xx
 * Status to answer with.
 */
import { loadPty, ptyMissingStatus } from './pty.js';
import { errorStatus, type V1Status } from '../../src/status.js';

/** Parsed exec/attach options (PodExecOptions / PodAttachOptions, container resolved). */
export interface StreamOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
  container: string;
  /** argv of the command (exec); empty for attach. */
  command: string[];
}

/** Either a value or the Status that refuses the request. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; status: V1Status };

/** The part of a pod that option parsing needs. */
export interface PodContainers {
  name: string;
  containers: readonly { name: string }[];
}

/**
 * The apiserver's bool rule (apimachinery `Convert_Slice_string_To_bool`): absent, `0` or `false`
 * (any case) is false; anything else, the empty string included, is true. Only the first value counts.
 */
export function queryBool(query: URLSearchParams, name: string): boolean {
  const value = query.get(name);
  if (value === null) return false;
  const v = value.toLowerCase();
  return !(v === 'false' || v === '0');
}

/**
 * Resolve the container of a streaming request: the named one, or the only one
 * (`pkg/registry/core/pod/strategy.go` `streamLocation`).
 */
export function resolveContainer(pod: PodContainers, requested: string): Parsed<string> {
  if (requested !== '') {
    if (pod.containers.some((c) => c.name === requested)) return { ok: true, value: requested };
    return { ok: false, status: errorStatus(400, `container ${requested} is not valid for pod ${pod.name}`) };
  }
  if (pod.containers.length === 1) return { ok: true, value: pod.containers[0]!.name };
  if (pod.containers.length === 0) {
    return { ok: false, status: errorStatus(400, `a container name must be specified for pod ${pod.name}`) };
  }
  const names = pod.containers.map((c) => c.name).join(' ');
  return {
    ok: false,
    status: errorStatus(400, `a container name must be specified for pod ${pod.name}, choose one of: [${names}]`),
  };
}

/**
 * Parse an exec or attach query. With tty, stderr is dropped (kubelet `NewOptions`); no stream at
 * all, or an exec without a command, is a 400.
 */
export function parseStreamOptions(
  subresource: 'exec' | 'attach',
  query: URLSearchParams,
  pod: PodContainers,
): Parsed<StreamOptions> {
  const container = resolveContainer(pod, query.get('container') ?? '');
  if (!container.ok) return container;
  const tty = queryBool(query, 'tty');
  const stdin = queryBool(query, 'stdin');
  const stdout = queryBool(query, 'stdout');
  const stderr = queryBool(query, 'stderr') && !tty;
  if (!stdin && !stdout && !stderr) {
    return { ok: false, status: errorStatus(400, 'you must specify at least 1 of stdin, stdout, stderr') };
  }
  const command = subresource === 'exec' ? query.getAll('command') : [];
  if (subresource === 'exec' && command.length === 0) {
    return { ok: false, status: errorStatus(400, 'you must specify at least one command for the container') };
  }
  if (tty && !loadPty()) return { ok: false, status: ptyMissingStatus() };
  return { ok: true, value: { stdin, stdout, stderr, tty, container: container.value, command } };
}

/**
 * Parse the ports of a port-forward (`ports=80&ports=443` or `ports=80,443`; the kubelet's `port`
 * is accepted too). `required` is the legacy WebSocket rule: no port is a 400.
 */
export function parsePortForwardPorts(query: URLSearchParams, required: boolean): Parsed<number[]> {
  const raw = [...query.getAll('ports'), ...query.getAll('port')];
  if (raw.length === 0) {
    if (required) return { ok: false, status: errorStatus(400, 'query parameter "port" is required') };
    return { ok: true, value: [] };
  }
  const ports: number[] = [];
  for (const value of raw) {
    if (value === '') return { ok: false, status: errorStatus(400, 'query parameter "port" cannot be empty') };
    for (const p of value.split(',')) {
      if (!/^\d{1,5}$/.test(p) || Number(p) > 65535) {
        return { ok: false, status: errorStatus(400, `unable to parse "${value}" as a port`) };
      }
      if (Number(p) < 1) return { ok: false, status: errorStatus(400, `port "${value}" must be > 0`) };
      ports.push(Number(p));
    }
  }
  return { ok: true, value: ports };
}

/**
 * Parse a kubelet exec/attach query (kubelet `remotecommand.NewOptions`): `input`, `output`,
 * `error` and `tty` are on only when exactly `1`; tty drops stderr; no stream at all is a 400. The
 * container comes from the URL and is taken as it is (the caller checks it exists); the command is
 * every `command` value.
 */
export function parseKubeletStreamOptions(
  subresource: 'exec' | 'attach',
  query: URLSearchParams,
  container: string,
): Parsed<StreamOptions> {
  const on = (name: string): boolean => query.get(name) === '1';
  const tty = on('tty');
  const stdin = on('input');
  const stdout = on('output');
  const stderr = on('error') && !tty;
  if (!stdin && !stdout && !stderr) {
    return { ok: false, status: errorStatus(400, 'you must specify at least 1 of stdin, stdout, stderr') };
  }
  const command = subresource === 'exec' ? query.getAll('command') : [];
  if (subresource === 'exec' && command.length === 0) {
    return { ok: false, status: errorStatus(400, 'you must specify at least one command for the container') };
  }
  if (tty && !loadPty()) return { ok: false, status: ptyMissingStatus() };
  return { ok: true, value: { stdin, stdout, stderr, tty, container, command } };
}
