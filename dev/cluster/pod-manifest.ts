/**
 * Validating the body of `POST /api/v1/namespaces/{ns}/pods` into what the registry creates. Only
 * what the dev cluster uses is read: name (or generateName), labels, annotations and, per container,
 * name, image, stdin, stdinOnce, tty, command and args.
 */
import { randomBytes } from 'node:crypto';
import { errorStatus, type V1Status } from '../../src/status.js';
import type { ContainerSpec } from './container-process.js';
import type { Parsed } from './stream-options.js';

/** A pod to create. */
export interface PodManifest {
  name: string;
  namespace: string;
  containers: ContainerSpec[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Parse and validate a Pod body posted to namespace `namespace`. */
export function parsePodManifest(body: unknown, namespace: string): Parsed<PodManifest> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return bad(400, 'the body of the request was not a Pod object');
  }
  const b = body as { kind?: unknown; metadata?: Record<string, unknown>; spec?: Record<string, unknown> };
  if (b.kind !== undefined && b.kind !== 'Pod') return bad(400, `expected kind Pod, got ${String(b.kind)}`);
  const meta = b.metadata ?? {};
  if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== namespace) {
    return bad(400, 'the namespace of the provided object does not match the namespace sent on the request');
  }
  let name = typeof meta.name === 'string' ? meta.name : '';
  if (name === '' && typeof meta.generateName === 'string' && meta.generateName !== '') {
    name = meta.generateName + randomBytes(3).toString('hex').slice(0, 5);
  }
  if (name === '') return invalid('', 'metadata.name: Required value: name or generateName is required');
  if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    return invalid(name, `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`);
  }
  const rawContainers = b.spec?.containers;
  if (!Array.isArray(rawContainers) || rawContainers.length === 0) {
    return invalid(name, 'spec.containers: Required value');
  }
  const containers: ContainerSpec[] = [];
  for (const [i, raw] of rawContainers.entries()) {
    const c = (raw ?? {}) as Record<string, unknown>;
    const cname = typeof c.name === 'string' ? c.name : '';
    if (!DNS_LABEL.test(cname) || cname.length > 63) {
      return invalid(name, `spec.containers[${i}].name: Invalid value: "${cname}"`);
    }
    if (containers.some((x) => x.name === cname)) {
      return invalid(name, `spec.containers[${i}].name: Duplicate value: "${cname}"`);
    }
    const strings = (v: unknown): string[] | undefined =>
      Array.isArray(v) && v.every((s) => typeof s === 'string') ? (v as string[]) : undefined;
    containers.push({
      name: cname,
      image: typeof c.image === 'string' && c.image !== '' ? c.image : 'busybox',
      stdin: c.stdin === true,
      stdinOnce: c.stdinOnce === true,
      tty: c.tty === true,
      command: strings(c.command),
      args: strings(c.args),
    });
  }
  return {
    ok: true,
    value: {
      name,
      namespace,
      containers,
      labels: stringMap(meta.labels),
      annotations: stringMap(meta.annotations),
    },
  };
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}

function bad(code: number, message: string): { ok: false; status: V1Status } {
  return { ok: false, status: errorStatus(code, message) };
}

function invalid(name: string, detail: string): { ok: false; status: V1Status } {
  return {
    ok: false,
    status: errorStatus(422, `Pod "${name}" is invalid: ${detail}`, 'Invalid', { name, kind: 'Pod' }),
  };
}
