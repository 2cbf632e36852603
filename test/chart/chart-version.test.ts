import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import { CHART_DIRECTORY, VERSIONS_FILE, chartContentHash, chartVersion, recordedVersions } from '../../scripts/record-chart-version.ts';
import { CHART, helm, parseManifests, podSpecs } from '../support/helm.ts';

/** Semantic versions compared by their three numbers (the chart has no pre-releases). */
function compareVersions(a: string, b: string): number {
  const [x, y] = [a, b].map((version) => version.split(/[.+-]/).slice(0, 3).map(Number)) as [number[], number[]];
  return x.map((part, index) => part - y[index]!).find((difference) => difference !== 0) ?? 0;
}

/**
 * Versioned releases: Flux's HelmRelease (reconcileStrategy ChartVersion, its default), Argo CD and Helm
 * repositories roll out a changed chart only when its version moves, so every change to charts/ or crds/ comes
 * with a new chart version, recorded in charts/versions.json with a hash of the content, and a section in
 * CHANGELOG.md. The chart's appVersion, and so the default image tag, is the project's version.
 */
describe('versioned releases of the chart', () => {
  const version = chartVersion();
  const versions = recordedVersions();

  it('records the content of the current chart version: a change to charts/ or crds/ comes with a new version', () => {
    const content = chartContentHash();
    const recorded = versions[version];
    const next = version.replace(/(\d+)$/, (patch) => String(Number(patch) + 1));
    const whatToDo =
      `raise version: in ${CHART_DIRECTORY}/Chart.yaml (e.g. to ${next}), add a "## [${next}]" section with its upgrade notes ` +
      `to CHANGELOG.md, then run: node scripts/record-chart-version.ts (it records the new version's content in ${VERSIONS_FILE}). ` +
      'Merging a branch that changed the chart into one whose version moved meanwhile: raise it past both and record again.';
    expect(recorded, `chart version ${version} is not recorded in ${VERSIONS_FILE}: ${whatToDo}`).to.not.equal(undefined);
    expect(content, `charts/ or crds/ changed since chart version ${version} was recorded (${recorded}): ${whatToDo}`).to.equal(recorded);
  });

  it('only goes up: the current version is the highest recorded, and no two versions record the same content', () => {
    const sorted = Object.keys(versions).sort(compareVersions);
    expect(sorted.at(-1), `${VERSIONS_FILE}'s newest version`).to.equal(version);
    expect(new Set(Object.values(versions)).size).to.equal(sorted.length);
  });

  it("has the project's version as appVersion, and so as the default image tag", async () => {
    const project = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
    const chart = load(readFileSync(`${CHART_DIRECTORY}/Chart.yaml`, 'utf8')) as { appVersion: string };
    expect(chart.appVersion).to.equal(project);
    const values = load(readFileSync(`${CHART_DIRECTORY}/values.yaml`, 'utf8')) as { image: { tag: string } };
    expect(values.image.tag, 'values.yaml image.tag: empty means appVersion').to.equal('');
    const rendered = await helm(['template', 'rel', CHART, '--namespace', 'audit', '--set', 'secrets.existingSecret=x']);
    expect(rendered.code, rendered.stderr).to.equal(0);
    const images = new Set(
      podSpecs(parseManifests(rendered.stdout)).flatMap(({ spec }) => spec.containers.map((c: { image: string }) => c.image)),
    );
    expect([...images]).to.deep.equal([`ghcr.io/audit-trail/audit-trail:${project}`]);
  });

  it('keeps a changelog with a dated section and upgrade notes for the current version, and a section for each recorded one', () => {
    const changelog = readFileSync('CHANGELOG.md', 'utf8');
    expect(changelog).to.match(/^# Changelog\n/);
    expect(changelog).to.include('## [Unreleased]');
    const section = new RegExp(`^## \\[${version.replaceAll('.', '\\.')}\\] - (\\d{4}-\\d{2}-\\d{2})$([\\s\\S]*?)(?=^## \\[)`, 'm').exec(
      changelog,
    );
    expect(section, `CHANGELOG.md has no "## [${version}] - YYYY-MM-DD" section`).to.not.equal(null);
    expect(section![2], `the ${version} section's upgrade notes`).to.include('### Upgrade notes');
    for (const recorded of Object.keys(versions)) expect(changelog, `a section for ${recorded}`).to.include(`## [${recorded}]`);
  });
});
