/** Test builders for APIService objects (validated through parseAPIServices, so they are real). */
import { parseAPIServices, type APIService } from '../../../src/aggregation/apiservice.js';

/** Options of {@link apiService}. */
export interface APIServiceSpecOptions {
  /** `ns/name[:port]`, `url:https://…` for the backend-url annotation, or `local` (default). */
  backend?: string;
}

/** A validated APIService `<version>.<group>` with the given priorities. */
export function apiService(name: string, groupPriorityMinimum: number, versionPriority: number, o: APIServiceSpecOptions = {}): APIService {
  const dot = name.indexOf('.');
  const spec: Record<string, unknown> = { group: name.slice(dot + 1), version: name.slice(0, dot), groupPriorityMinimum, versionPriority, service: null };
  const metadata: Record<string, unknown> = { name };
  const b = o.backend ?? 'local';
  if (b.startsWith('url:')) metadata.annotations = { 'kube-stream-proxy.io/backend-url': b.slice(4) };
  else if (b !== 'local') {
    const [ns, rest] = b.split('/') as [string, string];
    const [svc, port] = rest.split(':');
    spec.service = { namespace: ns, name: svc, ...(port ? { port: Number(port) } : {}) };
  }
  return parseAPIServices(JSON.stringify({ apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata, spec }), 'test')[0]!;
}
