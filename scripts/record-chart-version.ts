// Records the content of the chart at its current version: charts/versions.json maps each chart version to a
// hash of charts/audit-trail/ and crds/ (Chart.yaml without its version line). test/chart/chart-version.test.ts
// fails while the chart's content differs from what its version recorded: Flux (reconcileStrategy ChartVersion),
// Argo CD and Helm repositories roll out a changed chart only when its version moves. So, after changing
// charts/ or crds/: raise `version:` in charts/audit-trail/Chart.yaml, add its section to CHANGELOG.md, then run
//   node scripts/record-chart-version.ts
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CHART_DIRECTORY = 'charts/audit-trail';
export const VERSIONS_FILE = 'charts/versions.json';
const CONTENT = [CHART_DIRECTORY, 'crds'];

function files(directory: string): string[] {
  return readdirSync(directory)
    .sort()
    .flatMap((name) => {
      const path = join(directory, name);
      return statSync(path).isDirectory() ? files(path) : [path];
    });
}

/** The chart's version, from Chart.yaml. */
export function chartVersion(): string {
  const match = /^version:\s*"?([^"\s]+)"?\s*$/m.exec(readFileSync(join(CHART_DIRECTORY, 'Chart.yaml'), 'utf8'));
  if (!match) throw new Error(`${CHART_DIRECTORY}/Chart.yaml has no version`);
  return match[1]!;
}

/** sha256 over every file of the chart and of crds/, path and content, with Chart.yaml's version line left out. */
export function chartContentHash(): string {
  const hash = createHash('sha256');
  for (const path of CONTENT.flatMap(files)) {
    let content = readFileSync(path);
    if (path === join(CHART_DIRECTORY, 'Chart.yaml')) content = Buffer.from(content.toString('utf8').replace(/^version:.*$/m, ''));
    hash.update(`${path}\0${content.length}\0`).update(content);
  }
  return `sha256:${hash.digest('hex')}`;
}

export function recordedVersions(): Record<string, string> {
  return JSON.parse(readFileSync(VERSIONS_FILE, 'utf8')) as Record<string, string>;
}

if (import.meta.main) {
  const version = chartVersion();
  const content = chartContentHash();
  const versions = recordedVersions();
  if (versions[version] !== undefined && versions[version] !== content) {
    console.error(
      `chart version ${version} was recorded with other content: a released version never changes. Raise version: in ` +
        `${CHART_DIRECTORY}/Chart.yaml, add its section to CHANGELOG.md, and run this again.`,
    );
    process.exit(1);
  }
  writeFileSync(VERSIONS_FILE, `${JSON.stringify({ ...versions, [version]: content }, null, 2)}\n`);
  console.log(`recorded chart ${version}: ${content}`);
}
