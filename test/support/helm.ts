import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { kubernetesBinaries } from './k8s-binaries.ts';

const run = promisify(execFile);

export const CHART = 'charts/audit-trail';

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: any;
};

export interface HelmResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the helm binary that comes with npm ci; never throws for a failed command. */
export async function helm(args: string[], options: { cwd?: string } = {}): Promise<HelmResult> {
  try {
    const { stdout, stderr } = await run(kubernetesBinaries().helm, args, { maxBuffer: 32 * 1024 * 1024, cwd: options.cwd });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

export function parseManifests(text: string): Manifest[] {
  return loadAll(text).filter((doc): doc is Manifest => doc !== null && typeof doc === 'object');
}

export const byKind = (manifests: Manifest[], kind: string) => manifests.filter((manifest) => manifest.kind === kind);

export function named(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name === name);
  if (found === undefined)
    throw new Error(`no ${kind} ${name} among ${manifests.map((manifest) => `${manifest.kind}/${manifest.metadata.name}`).join(', ')}`);
  return found;
}

/** The pod specs of Deployments, Jobs and Pods. */
export function podSpecs(manifests: Manifest[]): Array<{ owner: string; spec: any }> {
  return manifests.flatMap((manifest) => {
    if (manifest.kind === 'Deployment' || manifest.kind === 'Job')
      return [{ owner: `${manifest.kind}/${manifest.metadata.name}`, spec: manifest.spec.template.spec }];
    if (manifest.kind === 'CronJob')
      return [{ owner: `CronJob/${manifest.metadata.name}`, spec: manifest.spec.jobTemplate.spec.template.spec }];
    if (manifest.kind === 'Pod') return [{ owner: `Pod/${manifest.metadata.name}`, spec: manifest.spec }];
    return [];
  });
}

/** A container's environment as name → value (or its valueFrom). */
export function environment(container: { env: Array<{ name: string; value?: string; valueFrom?: unknown }> }): Record<string, unknown> {
  return Object.fromEntries(container.env.map((variable) => [variable.name, variable.value ?? variable.valueFrom]));
}
