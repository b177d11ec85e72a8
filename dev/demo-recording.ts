/**
 * The demo's session recording (`npm start`, docs/recording.md): a policy recording the output of
 * every exec and attach session of pod `demo` (and a metadata record of its port-forwards), written
 * next to the kubeconfig with the recordings directory, so that after a first
 * `kubectl exec -it demo -- sh`, `kube-stream-proxy sessions list` (whose default directory is
 * `./.kube-stream-proxy/recordings`) shows it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The demo's recording policy. */
export const DEMO_RECORDING_POLICY = `# Written by kube-stream-proxy demo: record pod demo's sessions (docs/recording.md).
apiVersion: kube-stream-proxy.io/v1alpha1
kind: SessionRecordingConfiguration
rules:
- name: demo-pod
  match:
    pods: [demo]
  record: output
`;

/** Write the policy into `dir` (the demo's folder); the `serve` flags that record with it. */
export function demoRecordingFlags(dir: string): { sessionRecordingConfig: string; sessionRecordingDir: string } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const sessionRecordingConfig = join(dir, 'session-recording.yaml');
  writeFileSync(sessionRecordingConfig, DEMO_RECORDING_POLICY, { mode: 0o600 });
  return { sessionRecordingConfig, sessionRecordingDir: join(dir, 'recordings') };
}
