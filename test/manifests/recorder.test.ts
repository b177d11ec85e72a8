/**
 * `manifests/recorder/` (issue 23: the remote session recorder as a Deployment with a PVC): renders
 * with kubectl 1.33's kustomize; the Deployment, its PVC, Service and RBAC agree with each other;
 * every flag it passes is one `kube-stream-proxy recorder --help` lists; every file a flag names is
 * on a mounted volume; one writer for the ReadWriteOnce volume (Recreate); the viewer role grants the
 * documented virtual resource's group, every cluster's recordings.
 *
 * Needs `npm run build` (the built CLI's --help).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { RECORDING_API_GROUP, RECORDING_RESOURCE } from '../../src/recording/recorder-auth.js';
import { findKubectl, kubectlE2eSkipReason } from '../helpers/kubectl.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'bin/kube-stream-proxy.js');

type Obj = { kind: string; metadata: { name: string; namespace?: string }; [k: string]: any };

describe.skipIf(kubectlE2eSkipReason() !== undefined)('kubectl kustomize manifests/recorder/', () => {
  let objects: Obj[];
  const one = (kind: string, name?: string): Obj => {
    const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
    expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(() => {
    const yaml = execFileSync(findKubectl('1.33'), ['kustomize', join(ROOT, 'manifests/recorder')], { encoding: 'utf8' });
    objects = (loadAllYaml(yaml) as Obj[]).filter(Boolean);
  });

  it('renders the recorder: Deployment, PVC, Service, service account and RBAC, in kube-stream-proxy', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRole', 'ClusterRoleBinding', 'Deployment', 'PersistentVolumeClaim', 'Service', 'ServiceAccount'].sort());
    for (const o of objects.filter((o) => !o.kind.startsWith('Cluster'))) expect(o.metadata.namespace, o.kind).toBe('kube-stream-proxy');
  });

  it('the Deployment writes to its PVC alone (Recreate), is selected by the Service, runs as non-root', () => {
    const d = one('Deployment');
    const pod = d.spec.template.spec;
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy.type).toBe('Recreate');
    expect(one('PersistentVolumeClaim').spec.accessModes).toEqual(['ReadWriteOnce']);
    const claim = pod.volumes.find((v: any) => v.persistentVolumeClaim)?.persistentVolumeClaim.claimName;
    expect(claim).toBe(one('PersistentVolumeClaim').metadata.name);
    const svc = one('Service');
    for (const [k, v] of Object.entries(svc.spec.selector as Record<string, string>)) expect(d.spec.template.metadata.labels[k], k).toBe(v);
    expect(svc.spec.ports[0].targetPort).toBe(pod.containers[0].ports[0].name);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.containers[0].securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(pod.serviceAccountName).toBe(one('ServiceAccount').metadata.name);
  });

  it('passes only flags recorder --help lists; every file and the --dir are on mounted volumes', () => {
    const help = spawnSync(process.execPath, [CLI, 'recorder', '--help'], { encoding: 'utf8' }).stdout;
    const listed = new Set([...help.matchAll(/^\s+(--[a-z-]+)/gm)].map((m) => m[1]!));
    const c = one('Deployment').spec.template.spec.containers[0];
    expect(c.args[0]).toBe('recorder');
    const mounts: string[] = c.volumeMounts.map((m: any) => m.mountPath);
    for (const a of c.args.slice(1) as string[]) {
      const [flag, value] = a.split('=');
      expect(listed.has(flag!), `${flag} in recorder --help`).toBe(true);
      if (value?.startsWith('/')) expect(mounts.some((m) => value === m || value.startsWith(`${m}/`)), `${a} on a mount`).toBe(true);
    }
    expect(c.args).toContain('--in-cluster');
  });

  it('RBAC: the recorder may review (TokenReview, SubjectAccessReview) and nothing else; the viewer role names the virtual resource', () => {
    const role = one('ClusterRole', 'kube-stream-proxy-recorder');
    expect(role.rules).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
    const binding = one('ClusterRoleBinding');
    expect(binding.roleRef.name).toBe(role.metadata.name);
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: one('ServiceAccount').metadata.name, namespace: 'kube-stream-proxy' }]);
    // Every cluster's recordings: `sessions` (the proxy's own upstream) and `sessions/NAME` (agent clusters; issue 31, finding 11).
    expect(one('ClusterRole', 'kube-stream-proxy-recording-viewer').rules).toEqual([{ apiGroups: [RECORDING_API_GROUP], resources: ['*'], verbs: ['get', 'list'] }]);
    expect(RECORDING_RESOURCE).toBe('sessions');
  });
});
