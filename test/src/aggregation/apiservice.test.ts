/** parseAPIServices: documents, lists, defaults, and kube-aggregator's validation with clear errors. */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import {
  BACKEND_URL_ANNOTATION,
  groupVersionOf,
  isLocal,
  parseAPIServices,
  toAPIServiceJSON,
} from '../../../src/aggregation/apiservice.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';
const PEM_B64 = Buffer.from(PEM).toString('base64');

const METRICS = `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
  labels: {k8s-app: metrics-server}
spec:
  group: metrics.k8s.io
  version: v1beta1
  service: {namespace: kube-system, name: metrics-server}
  caBundle: ${PEM_B64}
  groupPriorityMinimum: 100
  versionPriority: 100
`;

/** The error message parseAPIServices throws for `text`. */
function errorOf(text: string): string {
  try {
    parseAPIServices(text, 'apiservices.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

function spec(fields: string, name = 'v1.example.com', meta = ''): string {
  return `apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: ${name}${meta}}\nspec: {${fields}}\n`;
}

const OK = 'group: example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15';

describe('parseAPIServices', () => {
  it('reads an APIService with a Service, defaulting the port to 443 and decoding caBundle', () => {
    const [a] = parseAPIServices(METRICS, 'f');
    expect(a!.metadata).toEqual({ name: 'v1beta1.metrics.k8s.io', labels: { 'k8s-app': 'metrics-server' }, annotations: {} });
    expect(a!.spec.service).toEqual({ namespace: 'kube-system', name: 'metrics-server', port: 443 });
    expect(a!.spec.caBundle?.toString()).toBe(PEM);
    expect(a!.spec.insecureSkipTLSVerify).toBe(false);
    expect(a!.spec.groupPriorityMinimum).toBe(100);
    expect(a!.status.conditions).toEqual([]);
    expect(isLocal(a!)).toBe(false);
    expect(groupVersionOf(a!)).toBe('metrics.k8s.io/v1beta1');
  });

  it('reads several documents, skipping empty ones (leading/trailing ---, comments)', () => {
    const text = `---\n# registrations\n${METRICS}---\n${spec(`${OK}, service: null`)}---\n# nothing here\n---\n`;
    const all = parseAPIServices(text, 'f');
    expect(all.map((a) => a.metadata.name)).toEqual(['v1beta1.metrics.k8s.io', 'v1.example.com']);
    expect(isLocal(all[1]!)).toBe(true);
  });

  it('reads JSON, a v1 List and an APIServiceList', () => {
    const item = { apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata: { name: 'v1.a.io' }, spec: { group: 'a.io', version: 'v1', groupPriorityMinimum: 1, versionPriority: 1 } };
    const json = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [item] });
    const list = `apiVersion: apiregistration.k8s.io/v1\nkind: APIServiceList\nitems:\n- ${JSON.stringify({ ...item, metadata: { name: 'v2.a.io' }, spec: { ...item.spec, version: 'v2' } })}\n`;
    expect(parseAPIServices(`${json}\n---\n${list}`, 'f').map((a) => a.metadata.name)).toEqual(['v1.a.io', 'v2.a.io']);
  });

  it('reads the backend-url annotation as a remote backend, and round-trips to the API form', () => {
    const [a] = parseAPIServices(spec(`${OK}, insecureSkipTLSVerify: true`, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "https://10.0.0.7:8443"}`), 'f');
    expect(a!.backendURL?.href).toBe('https://10.0.0.7:8443/');
    expect(isLocal(a!)).toBe(false);
    const [b] = parseAPIServices(METRICS, 'f');
    expect(toAPIServiceJSON(b!)).toMatchObject({ spec: { caBundle: PEM_B64, service: { port: 443 } }, metadata: { labels: { 'k8s-app': 'metrics-server' } } });
    expect(JSON.stringify(toAPIServiceJSON(a!))).not.toContain('backendURL');
  });

  it.each([
    ['name not version.group', spec(OK, 'example'), 'document 1 (line 1) (APIService "example"): metadata.name: Invalid value: "example": must be `spec.version+"."+spec.group`: "v1.example.com"'],
    ['name with a slash', spec(OK, 'v1/x'), `metadata.name: Invalid value: "v1/x": may not contain '/'`],
    ['missing name', spec(OK, '""'), 'metadata.name: Required value: name or generateName is required'],
    ['empty group, not v1', spec('group: "", version: v2, groupPriorityMinimum: 1, versionPriority: 1', 'v2.'), 'spec.group: Required value: only v1 may have an empty group and it better be legacy kube'],
    ['group not DNS-1123', spec('group: Example.com, version: v1, groupPriorityMinimum: 1, versionPriority: 1', 'v1.Example.com'), 'spec.group: Invalid value: "Example.com": a lowercase RFC 1123 subdomain'],
    ['version not DNS-1035', spec('group: example.com, version: 1v, groupPriorityMinimum: 1, versionPriority: 1', '1v.example.com'), 'spec.version: Invalid value: "1v": a DNS-1035 label'],
    ['groupPriorityMinimum 0', spec('group: example.com, version: v1, groupPriorityMinimum: 0, versionPriority: 1'), 'spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000'],
    ['groupPriorityMinimum 20001', spec('group: example.com, version: v1, groupPriorityMinimum: 20001, versionPriority: 1'), 'spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000'],
    ['versionPriority 1001', spec('group: example.com, version: v1, groupPriorityMinimum: 1, versionPriority: 1001'), 'spec.versionPriority: Invalid value: 1001: must be positive and less than 1000'],
    ['versionPriority missing', spec('group: example.com, version: v1, groupPriorityMinimum: 1'), 'spec.versionPriority: Required value'],
    ['priority as a string', spec('group: example.com, version: v1, groupPriorityMinimum: "100", versionPriority: 1'), 'spec.groupPriorityMinimum: Invalid value: "100": must be an integer'],
    ['service without namespace', spec(`${OK}, service: {name: api}`), 'spec.service.namespace: Required value'],
    ['service without name', spec(`${OK}, service: {namespace: ns}`), 'spec.service.name: Required value'],
    ['service port 0', spec(`${OK}, service: {namespace: ns, name: api, port: 0}`), 'spec.service.port: Invalid value: 0: must be between 1 and 65535, inclusive'],
    ['service port 65536', spec(`${OK}, service: {namespace: ns, name: api, port: 65536}`), 'spec.service.port: Invalid value: 65536'],
    ['caBundle with insecureSkipTLSVerify', spec(`${OK}, service: {namespace: ns, name: api}, insecureSkipTLSVerify: true, caBundle: ${PEM_B64}`), 'spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present'],
    ['caBundle on a local APIService', spec(`${OK}, service: null, caBundle: ${PEM_B64}`), `spec.caBundle: Invalid value: "${PEM.length} bytes": local APIServices may not have a caBundle`],
    ['insecureSkipTLSVerify on a local APIService', spec(`${OK}, insecureSkipTLSVerify: true`), 'spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify'],
    ['caBundle not base64', spec(`${OK}, service: {namespace: ns, name: api}, caBundle: "not base64!"`), 'spec.caBundle: Invalid value: "11 characters": must be base64-encoded PEM'],
    ['caBundle not PEM', spec(`${OK}, service: {namespace: ns, name: api}, caBundle: aGVsbG8=`), 'spec.caBundle: Invalid value: "5 bytes": must be PEM-encoded certificates'],
    ['backend-url http', spec(OK, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "http://h:1"}`), `metadata.annotations[${BACKEND_URL_ANNOTATION}]: Invalid value: "http://h:1": must use https`],
    ['backend-url with a path', spec(OK, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "https://h:1/api"}`), 'must be https://host[:port] with no path, query or fragment'],
    ['backend-url with a query', spec(OK, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "https://h:1?x=1"}`), 'must be https://host[:port] with no path, query or fragment'],
    ['backend-url not a URL', spec(OK, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "://nohost"}`), 'must be an absolute URL'],
    ['backend-url and a service', spec(`${OK}, service: {namespace: ns, name: api}`, 'v1.example.com', `, annotations: {${BACKEND_URL_ANNOTATION}: "https://h:1"}`), 'spec.service: Forbidden: may not be set together with'],
    ['a backend for apiregistration.k8s.io', spec('group: apiregistration.k8s.io, version: v1, groupPriorityMinimum: 1, versionPriority: 1, service: {namespace: ns, name: api}', 'v1.apiregistration.k8s.io'), 'spec.group: Forbidden: apiregistration.k8s.io is served by the proxy itself'],
    ['wrong apiVersion', spec(OK).replace('apiregistration.k8s.io/v1', 'v1'), 'apiVersion: Invalid value: "v1": must be apiregistration.k8s.io/v1'],
    ['wrong kind', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n', 'document 1 (line 1): kind "ConfigMap" is not APIService, APIServiceList or List'],
    ['a scalar document', 'just text\n', 'document 1 (line 1): is not an object'],
    ['a List without items', 'apiVersion: v1\nkind: List\n', 'items: Required value'],
  ])('rejects %s', (_name, text, message) => {
    expect(errorOf(text)).toContain(message);
  });

  it('names the source, the document and its line, and the list item', () => {
    const bad = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata: { name: 'v1.a.io' }, spec: { group: 'a.io', version: 'v1', groupPriorityMinimum: 1, versionPriority: 0 } }] });
    const msg = errorOf(`${METRICS}---\n${bad}\n`);
    expect(msg).toMatch(/^apiservices\.yaml: invalid APIService configuration:/);
    expect(msg).toContain('document 2 (line 13), items[0] (APIService "v1.a.io"): spec.versionPriority: Invalid value: 0');
  });

  it('reports YAML syntax errors with the line in the file', () => {
    expect(errorOf(`${METRICS}---\nkind: [\n`)).toMatch(/document 2 \(line 13\): invalid YAML: .* \(line 1[45], column \d+\)/);
  });

  it('reports duplicate names, naming the first occurrence', () => {
    expect(errorOf(`${METRICS}---\n${METRICS}`)).toContain('document 2 (line 13) (APIService "v1beta1.metrics.k8s.io"): metadata.name: Duplicate value: "v1beta1.metrics.k8s.io" (also in document 1 (line 1))');
  });

  it('lists every problem, not just the first', () => {
    const msg = errorOf(spec('group: example.com, version: v1, groupPriorityMinimum: 0, versionPriority: 0'));
    expect(msg).toContain('spec.groupPriorityMinimum');
    expect(msg).toContain('spec.versionPriority');
  });

  it('accepts the core group only as v1 and an empty file as no APIServices', () => {
    expect(parseAPIServices(spec('group: "", version: v1, groupPriorityMinimum: 18000, versionPriority: 1', 'v1.'), 'f')[0]!.spec.group).toBe('');
    expect(parseAPIServices('', 'f')).toEqual([]);
    expect(parseAPIServices('# nothing\n---\n', 'f')).toEqual([]);
  });
});
