/**
 * An offline schema check of rendered Kubernetes objects, kubeconform-style (no cluster: `kubectl
 * create --dry-run` needs a server's OpenAPI, see docs/decisions.md):
 * - types, required fields, enums and formats from the JSON schemas that `kubernetes-models` (the
 *   Kubernetes OpenAPI) and `@kubernetes-models/prometheus-operator` (the operator's CRDs) ship;
 * - for built-in kinds, also no unknown field (a typo such as `behaviour:` would be dropped by the
 *   apiserver and pass a plain JSON-schema check), from the field tables of `@kubernetes/client-node`'s
 *   OpenAPI-generated models — what kubeconform's `-strict` does.
 * A kind that neither package knows is an error, never a silent pass.
 */
import * as k8s from '@kubernetes/client-node';

/** A rendered object. */
export type ManifestObject = { apiVersion: string; kind: string; metadata?: { name?: string }; [k: string]: unknown };

type Attribute = { baseName: string; type: string };
type ModelClass = { getAttributeTypeMap(): Attribute[] };
type Validated = { validate(): void };

/** Groups whose models come from the Prometheus Operator package instead of `kubernetes-models`. */
const CRD_PACKAGES: Record<string, string> = { 'monitoring.coreos.com': '@kubernetes-models/prometheus-operator' };

/** Types the field tables do not describe further. */
const OPAQUE = new Set(['string', 'number', 'boolean', 'any', 'object', 'Date', 'IntOrString']);

/** The `kubernetes-models`-style model class of `apiVersion`/`kind`, or undefined. */
async function modelOf(apiVersion: string, kind: string): Promise<(new (data: object) => Validated) | undefined> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const pkg = CRD_PACKAGES[group!] ?? 'kubernetes-models';
  try {
    const mod = (await import(`${pkg}/${group ? `${group}/` : ''}${version}`)) as Record<string, unknown>;
    return mod[kind] as (new (data: object) => Validated) | undefined;
  } catch {
    return undefined;
  }
}

/** Paths of fields that `type` (a client-node model type name) does not have, under `path`. */
function unknownFields(value: unknown, type: string, path: string): string[] {
  if (value === null || value === undefined) return [];
  const t = type.replace(/ \| (null|undefined)$/, '');
  if (t.startsWith('Array<')) {
    return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, t.slice(6, -1), `${path}[${i}]`)) : [];
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(t);
  if (map) return typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1]!, `${path}.${k}`)) : [];
  if (OPAQUE.has(t)) return [];
  const model = (k8s as unknown as Record<string, ModelClass | undefined>)[t];
  if (!model?.getAttributeTypeMap || typeof value !== 'object') return [];
  const attributes = model.getAttributeTypeMap();
  return Object.entries(value).flatMap(([k, v]) => {
    const a = attributes.find((x) => x.baseName === k);
    return a ? unknownFields(v, a.type, `${path}.${k}`) : [`${path}.${k}`];
  });
}

/** The problems of `obj` against the schema of its kind; empty when it passes. */
export async function schemaProblems(obj: ManifestObject): Promise<string[]> {
  const what = `${obj.apiVersion} ${obj.kind} ${obj.metadata?.name ?? '(no name)'}`;
  const Model = await modelOf(obj.apiVersion, obj.kind);
  if (!Model) return [`${what}: no schema for this apiVersion and kind`];
  const problems: string[] = [];
  try {
    new Model(obj).validate();
  } catch (e) {
    problems.push(`${what}: ${(e as Error).message}`);
  }
  if (!CRD_PACKAGES[obj.apiVersion.split('/')[0]!]) {
    const version = obj.apiVersion.split('/').pop()!;
    const type = `${version[0]!.toUpperCase()}${version.slice(1)}${obj.kind}`;
    if (!(k8s as unknown as Record<string, unknown>)[type]) problems.push(`${what}: no field table ${type} in @kubernetes/client-node`);
    else for (const f of unknownFields(obj, type, '')) problems.push(`${what}: unknown field ${f.slice(1)}`);
  }
  return problems;
}
