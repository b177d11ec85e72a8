/**
 * `kubectl kustomize` (kubectl 1.33's built-in kustomize) of the repository's manifests: a folder, or
 * the base with Components the way a user's overlay names them (kustomize refuses an overlay inside
 * its base's folder, so the overlay is written to a temporary folder outside the repository).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { findKubectl } from '../helpers/kubectl.js';
import type { ManifestObject } from './manifest-schema.js';

/** The repository's manifests/ folder. */
export const MANIFESTS = resolve(import.meta.dirname, '../../manifests');

/** The objects `kubectl kustomize DIR` renders. */
export function renderDir(dir: string): ManifestObject[] {
  const yaml = execFileSync(findKubectl('1.33'), ['kustomize', dir], { encoding: 'utf8' });
  return (loadAllYaml(yaml) as ManifestObject[]).filter(Boolean);
}

/** The objects of an overlay of manifests/ with `components` (folders under manifests/). */
export function renderWithComponents(components: readonly string[]): ManifestObject[] {
  const overlay = mkdtempSync(join(tmpdir(), 'ksp-overlay-'));
  try {
    const base = relative(overlay, MANIFESTS);
    writeFileSync(
      join(overlay, 'kustomization.yaml'),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${base}\ncomponents:\n${components.map((c) => `  - ${base}/${c}\n`).join('')}`,
    );
    return renderDir(overlay);
  } finally {
    rmSync(overlay, { recursive: true, force: true });
  }
}
