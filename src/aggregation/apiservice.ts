/**
 * The `apiregistration.k8s.io/v1` `APIService` object as the proxy reads it from `--apiservice-config`,
 * and {@link parseAPIServices}, which turns one or more YAML/JSON documents into validated objects.
 *
 * Validation follows kube-aggregator's `apiregistration/validation/validation.go` (the name must be
 * `<version>.<group>`, DNS rules for group and version, priority ranges, local APIServices carry no
 * TLS settings, `insecureSkipTLSVerify` excludes `caBundle`) plus what the proxy needs on top: a port
 * range, service names usable in a TLS server name, PEM in `caBundle`, duplicate names across the
 * file, and this project's `kube-stream-proxy.io/backend-url` annotation. Every error names the
 * source, the document (and its first line) and the field, in the Kubernetes field-error style
 * (`spec.versionPriority: Invalid value: 0: must be positive and less than 1000`).
 *
 * Loading this module loads `@kubernetes/client-node` (through `yaml-documents.ts`; about 1.5 s on
 * this machine class): import it lazily, only when `--apiservice-config` is given. Modules that only
 * need the type use `import type`.
 */
import { ConfigError } from '../errors.js';
import { loadYamlDocuments } from './yaml-documents.js';

/** The annotation naming a backend outside any cluster: `https://host[:port]`, no path or query. */
export const BACKEND_URL_ANNOTATION = 'kube-stream-proxy.io/backend-url';

/** `spec.service.port` when unset, as kube-aggregator defaults it ("for compatibility reasons"). */
export const DEFAULT_SERVICE_PORT = 443;

/** `spec.service`: the in-cluster Service fronting the extension API server. */
export interface ServiceReference {
  readonly namespace: string;
  readonly name: string;
  /** 1..65535; 443 when unset. */
  readonly port: number;
}

/** One entry of `status.conditions`; the only type kube-aggregator sets is `Available`. */
export interface APIServiceCondition {
  readonly type: 'Available';
  readonly status: 'True' | 'False' | 'Unknown';
  readonly lastTransitionTime?: string;
  readonly reason?: string;
  readonly message?: string;
}

/** `APIService.spec`, with kube-aggregator's field meanings. */
export interface APIServiceSpec {
  /** The API group served; `""` only for the legacy core group (`v1.`). */
  readonly group: string;
  /** The version served, a DNS-1035 label such as `v1beta1`. */
  readonly version: string;
  /** The backend Service; `null` means local (served by the primary upstream) unless {@link APIService.backendURL} is set. */
  readonly service: ServiceReference | null;
  /** Decoded `caBundle` (base64 PEM in the document); `undefined` means the system roots. */
  readonly caBundle: Buffer | undefined;
  /** Skip TLS verification of the backend ("strongly discouraged"); never together with a caBundle. */
  readonly insecureSkipTLSVerify: boolean;
  /** 1..20000; groups sort by their highest value, highest first. */
  readonly groupPriorityMinimum: number;
  /** 1..1000; versions sort within a group highest first, then by Kubernetes' version order. */
  readonly versionPriority: number;
}

/** A validated `apiregistration.k8s.io/v1` APIService. */
export interface APIService {
  readonly apiVersion: 'apiregistration.k8s.io/v1';
  readonly kind: 'APIService';
  readonly metadata: {
    /** Always `<version>.<group>`. */
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
    /** Set by the proxy: when this registration was first loaded (a file carries none). */
    readonly creationTimestamp?: string;
  };
  readonly spec: APIServiceSpec;
  /** Computed by the proxy (availability); a `status` in the file is ignored. */
  readonly status: { readonly conditions: readonly APIServiceCondition[] };
  /** The parsed {@link BACKEND_URL_ANNOTATION} (this project's extension), or `null`. */
  readonly backendURL: URL | null;
}

/** True when the primary upstream serves this APIService (no Service and no backend URL). */
export function isLocal(a: APIService): boolean {
  return a.spec.service === null && a.backendURL === null;
}

/** The group-version path segment: `group/version`, or just `version` for the core group. */
export function groupVersionOf(a: APIService): string {
  return a.spec.group === '' ? a.spec.version : `${a.spec.group}/${a.spec.version}`;
}

/** The APIService as the Kubernetes API serves it (caBundle base64 again, no proxy-only fields). */
export function toAPIServiceJSON(a: APIService): Record<string, unknown> {
  const spec: Record<string, unknown> = {
    group: a.spec.group,
    version: a.spec.version,
    groupPriorityMinimum: a.spec.groupPriorityMinimum,
    versionPriority: a.spec.versionPriority,
  };
  if (a.spec.service) spec.service = { ...a.spec.service };
  if (a.spec.insecureSkipTLSVerify) spec.insecureSkipTLSVerify = true;
  if (a.spec.caBundle) spec.caBundle = a.spec.caBundle.toString('base64');
  const metadata: Record<string, unknown> = { name: a.metadata.name };
  if (Object.keys(a.metadata.labels).length > 0) metadata.labels = { ...a.metadata.labels };
  if (Object.keys(a.metadata.annotations).length > 0) metadata.annotations = { ...a.metadata.annotations };
  return { apiVersion: a.apiVersion, kind: a.kind, metadata, spec, status: { conditions: a.status.conditions.map((c) => ({ ...c })) } };
}

// --- validation rules (apimachinery util/validation) -------------------------------------------

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);
const DNS1123_LABEL_RE = new RegExp(`^${DNS1123_LABEL}$`);
const DNS1035_LABEL_RE = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** `IsDNS1123Subdomain`'s messages. */
function dns1123Subdomain(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 253) errs.push('must be no more than 253 characters');
  if (!DNS1123_SUBDOMAIN_RE.test(v)) {
    errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  }
  return errs;
}

/** `IsDNS1123Label`'s messages (namespaces). */
function dns1123Label(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1123_LABEL_RE.test(v)) {
    errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

/** `IsDNS1035Label`'s messages (versions, Service names). */
function dns1035Label(v: string): string[] {
  const errs: string[] = [];
  if (v.length > 63) errs.push('must be no more than 63 characters');
  if (!DNS1035_LABEL_RE.test(v)) {
    errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  }
  return errs;
}

/** Go's `%v`/`%q` rendering of a value in a field error. */
function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === undefined) return 'null';
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

/** Collects `field: Kind: detail` errors for one object. */
class FieldErrors {
  readonly list: string[] = [];
  invalid(field: string, value: unknown, detail: string): void {
    this.list.push(`${field}: Invalid value: ${show(value)}: ${detail}`);
  }
  required(field: string, detail = ''): void {
    this.list.push(`${field}: Required value${detail ? `: ${detail}` : ''}`);
  }
  forbidden(field: string, detail: string): void {
    this.list.push(`${field}: Forbidden: ${detail}`);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function stringMap(v: unknown, field: string, errs: FieldErrors): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isRecord(v)) {
    errs.invalid(field, v, 'must be a map of strings');
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') errs.invalid(`${field}[${k}]`, val, 'must be a string');
    else out[k] = val;
  }
  return out;
}

function integerIn(v: unknown, field: string, min: number, max: number, detail: string, errs: FieldErrors): number {
  if (v === undefined || v === null) {
    errs.required(field, detail);
    return 0;
  }
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    errs.invalid(field, v, 'must be an integer');
    return 0;
  }
  if (v < min || v > max) errs.invalid(field, v, detail);
  return v;
}

const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

function decodeCABundle(v: unknown, errs: FieldErrors): Buffer | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') {
    errs.invalid('spec.caBundle', v, 'must be a base64-encoded string');
    return undefined;
  }
  const compact = v.replace(/[\r\n]/g, '');
  if (compact.length % 4 !== 0 || !BASE64_RE.test(compact)) {
    errs.invalid('spec.caBundle', `${v.length} characters`, 'must be base64-encoded PEM (as `base64 -w0 ca.crt` prints it)');
    return undefined;
  }
  const pem = Buffer.from(compact, 'base64');
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    errs.invalid('spec.caBundle', `${pem.length} bytes`, 'must be PEM-encoded certificates (no "-----BEGIN CERTIFICATE-----" found after base64 decoding)');
    return undefined;
  }
  return pem;
}

function parseBackendURL(raw: string, errs: FieldErrors): URL | null {
  const field = `metadata.annotations[${BACKEND_URL_ANNOTATION}]`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    errs.invalid(field, raw, 'must be an absolute URL https://host[:port]');
    return null;
  }
  if (url.protocol !== 'https:') errs.invalid(field, raw, 'must use https');
  else if (url.username || url.password) errs.invalid(field, raw, 'must not carry credentials');
  else if (url.pathname !== '/' || raw.replace(/\/$/, '') !== `${url.protocol}//${url.host}`) {
    errs.invalid(field, raw, 'must be https://host[:port] with no path, query or fragment (the request path is appended)');
  } else return url;
  return null;
}

function parseService(v: Record<string, unknown>, errs: FieldErrors): ServiceReference {
  const namespace = typeof v.namespace === 'string' ? v.namespace : '';
  const name = typeof v.name === 'string' ? v.name : '';
  if (namespace === '') errs.required('spec.service.namespace');
  else for (const e of dns1123Label(namespace)) errs.invalid('spec.service.namespace', namespace, e);
  if (name === '') errs.required('spec.service.name');
  else for (const e of dns1035Label(name)) errs.invalid('spec.service.name', name, e);
  let port = DEFAULT_SERVICE_PORT;
  if (v.port !== undefined && v.port !== null) {
    port = integerIn(v.port, 'spec.service.port', 1, 65535, 'must be between 1 and 65535, inclusive', errs);
  }
  return { namespace, name, port };
}

/** Validate one decoded object as an APIService; errors go to `errs`. */
function toAPIService(obj: Record<string, unknown>, errs: FieldErrors): APIService {
  const meta = isRecord(obj.metadata) ? obj.metadata : {};
  if (obj.metadata !== undefined && !isRecord(obj.metadata)) errs.invalid('metadata', obj.metadata, 'must be an object');
  const rawSpec = isRecord(obj.spec) ? obj.spec : {};
  if (!isRecord(obj.spec)) errs.required('spec');

  const group = typeof rawSpec.group === 'string' ? rawSpec.group : '';
  if (rawSpec.group !== undefined && typeof rawSpec.group !== 'string') errs.invalid('spec.group', rawSpec.group, 'must be a string');
  const version = typeof rawSpec.version === 'string' ? rawSpec.version : '';
  if (rawSpec.version !== undefined && typeof rawSpec.version !== 'string') errs.invalid('spec.version', rawSpec.version, 'must be a string');

  const name = typeof meta.name === 'string' ? meta.name : '';
  const requiredName = `${version}.${group}`;
  if (name === '') errs.required('metadata.name', 'name or generateName is required');
  else if (name === '.' || name === '..') errs.invalid('metadata.name', name, `may not be '${name}'`);
  else if (name.includes('/') || name.includes('%')) errs.invalid('metadata.name', name, `may not contain '${name.includes('/') ? '/' : '%'}'`);
  else if (name !== requiredName) errs.invalid('metadata.name', name, `must be \`spec.version+"."+spec.group\`: ${JSON.stringify(requiredName)}`);
  const labels = stringMap(meta.labels, 'metadata.labels', errs);
  const annotations = stringMap(meta.annotations, 'metadata.annotations', errs);

  if (group === '' && version !== 'v1') errs.required('spec.group', 'only v1 may have an empty group and it better be legacy kube');
  if (group !== '') for (const e of dns1123Subdomain(group)) errs.invalid('spec.group', group, e);
  if (version === '') errs.required('spec.version');
  else for (const e of dns1035Label(version)) errs.invalid('spec.version', version, e);

  const groupPriorityMinimum = integerIn(rawSpec.groupPriorityMinimum, 'spec.groupPriorityMinimum', 1, 20000, 'must be positive and less than 20000', errs);
  const versionPriority = integerIn(rawSpec.versionPriority, 'spec.versionPriority', 1, 1000, 'must be positive and less than 1000', errs);

  let insecureSkipTLSVerify = false;
  if (rawSpec.insecureSkipTLSVerify !== undefined && rawSpec.insecureSkipTLSVerify !== null) {
    if (typeof rawSpec.insecureSkipTLSVerify !== 'boolean') errs.invalid('spec.insecureSkipTLSVerify', rawSpec.insecureSkipTLSVerify, 'must be true or false');
    else insecureSkipTLSVerify = rawSpec.insecureSkipTLSVerify;
  }
  const caBundle = decodeCABundle(rawSpec.caBundle, errs);

  let service: ServiceReference | null = null;
  if (rawSpec.service !== undefined && rawSpec.service !== null) {
    if (!isRecord(rawSpec.service)) errs.invalid('spec.service', rawSpec.service, 'must be an object or null');
    else service = parseService(rawSpec.service, errs);
  }
  const rawURL = annotations[BACKEND_URL_ANNOTATION];
  const backendURL = rawURL === undefined ? null : parseBackendURL(rawURL, errs);
  if (rawURL !== undefined && service !== null) {
    errs.forbidden('spec.service', `may not be set together with the ${BACKEND_URL_ANNOTATION} annotation (which names the backend instead)`);
  }
  const remote = service !== null || rawURL !== undefined;
  if (!remote) {
    if (caBundle) errs.invalid('spec.caBundle', `${caBundle.length} bytes`, 'local APIServices may not have a caBundle');
    if (insecureSkipTLSVerify) errs.invalid('spec.insecureSkipTLSVerify', true, 'local APIServices may not have insecureSkipTLSVerify');
  } else {
    if (insecureSkipTLSVerify && caBundle) errs.invalid('spec.insecureSkipTLSVerify', true, 'may not be true if caBundle is present');
    if (group === 'apiregistration.k8s.io') errs.forbidden('spec.group', 'apiregistration.k8s.io is served by the proxy itself and cannot have a backend');
  }

  return {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name, labels, annotations },
    spec: { group, version, service, caBundle, insecureSkipTLSVerify, groupPriorityMinimum, versionPriority },
    status: { conditions: [] },
    backendURL,
  };
}

const LIST_KINDS = new Set(['List', 'APIServiceList']);
const APISERVICE_VERSIONS = new Set(['apiregistration.k8s.io/v1', 'apiregistration.k8s.io/v1beta1']);

/**
 * Parse and validate the APIServices in `text` (one or more YAML or JSON documents separated by
 * `---`; each an `APIService`, an `APIServiceList` or a `v1` `List` of APIServices). `source` names
 * the input in errors (the file path). `apiregistration.k8s.io/v1beta1` objects are read as v1 (the
 * same fields). Throws one {@link ConfigError} listing every problem, each naming its document and field.
 */
export function parseAPIServices(text: string, source: string): APIService[] {
  const problems: string[] = [];
  const out: APIService[] = [];
  const firstSeen = new Map<string, string>();

  const accept = (obj: unknown, where: string) => {
    if (!isRecord(obj)) {
      problems.push(`${where}: is not an object`);
      return;
    }
    const errs = new FieldErrors();
    if (obj.kind !== 'APIService') {
      problems.push(`${where}: kind ${show(obj.kind)} is not APIService, APIServiceList or List`);
      return;
    }
    if (typeof obj.apiVersion !== 'string' || !APISERVICE_VERSIONS.has(obj.apiVersion)) {
      errs.invalid('apiVersion', obj.apiVersion, 'must be apiregistration.k8s.io/v1');
    }
    const a = toAPIService(obj, errs);
    const label = a.metadata.name ? `${where} (APIService ${JSON.stringify(a.metadata.name)})` : where;
    if (a.metadata.name && errs.list.length === 0) {
      const prior = firstSeen.get(a.metadata.name);
      if (prior) errs.list.push(`metadata.name: Duplicate value: ${JSON.stringify(a.metadata.name)} (also in ${prior})`);
      else firstSeen.set(a.metadata.name, where);
    }
    if (errs.list.length > 0) problems.push(...errs.list.map((e) => `${label}: ${e}`));
    else out.push(a);
  };

  for (const doc of loadYamlDocuments(text, source)) {
    if ('error' in doc) {
      problems.push(`${doc.where}: ${doc.error}`);
      continue;
    }
    for (const obj of doc.objects) {
      if (isRecord(obj) && typeof obj.kind === 'string' && LIST_KINDS.has(obj.kind)) {
        if (!Array.isArray(obj.items)) {
          problems.push(`${doc.where}: items: Required value: a ${obj.kind} needs an items array`);
          continue;
        }
        obj.items.forEach((item, i) => accept(item, `${doc.where}, items[${i}]`));
      } else {
        accept(obj, doc.where);
      }
    }
  }
  if (problems.length > 0) {
    throw new ConfigError(`${source}: invalid APIService configuration:\n  ${problems.join('\n  ')}`);
  }
  return out;
}
