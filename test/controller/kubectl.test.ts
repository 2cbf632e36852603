import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { kubernetesBinaries } from '../support/k8s-binaries.ts';
import { startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { waitFor } from '../support/wait.ts';

const run = promisify(execFile);

/** The documented examples through a real kubectl (1.34) against the API stand-in, with the controller running. */
describe('kubectl with the documented examples', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let cacheDir: string;

  const kubectl = async (...args: string[]) => {
    // --validate=false: the stand-in serves discovery but no OpenAPI document (its own admission validates).
    const { stdout } = await run(kubernetesBinaries().kubectl, [
      '--kubeconfig',
      harness.kube.kubeconfigPath,
      '--cache-dir',
      cacheDir,
      ...args,
    ]);
    return stdout;
  };

  before(async () => {
    cacheDir = mkdtempSync(join(tmpdir(), 'kubectl-cache-'));
    harness = await startControllerHarness();
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await harness?.stop();
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  });

  it('applies, gets and deletes an ApiKey and a WebhookEndpoint', async () => {
    const applied = await kubectl(
      'apply',
      '--validate=false',
      '-f',
      'docs/examples/apikey.yaml',
      '-f',
      'docs/examples/webhookendpoint.yaml',
    );
    expect(applied).to.include('apikey.audittrail.dev/acme-siem created');
    expect(applied).to.include('webhookendpoint.audittrail.dev/acme-siem created');

    await waitFor(
      async () => JSON.parse(await kubectl('get', 'apikey', 'acme-siem', '-n', 'team-a', '-o', 'json')).status?.state === 'Active',
      'the key to be Active',
    );
    await waitFor(
      async () => JSON.parse(await kubectl('get', 'athook', 'acme-siem', '-n', 'team-a', '-o', 'json')).status?.active === true,
      'the endpoint to be active',
    );
    expect(await kubectl('get', 'audit-trail', '-n', 'team-a', '-o', 'name')).to.include('apikey.audittrail.dev/acme-siem');

    // Re-applying an unchanged manifest changes nothing; a changed one applies in place.
    expect(await kubectl('apply', '--validate=false', '-f', 'docs/examples/apikey.yaml')).to.include('unchanged');
    const key = JSON.parse(await kubectl('get', 'apikey', 'acme-siem', '-n', 'team-a', '-o', 'json'));
    const record = await harness.keys.find(key.status.lookupId);
    expect(record.scopes).to.deep.equal(['audit:export', 'audit:read']);

    expect(
      await kubectl('delete', '-f', 'docs/examples/apikey.yaml', '-f', 'docs/examples/webhookendpoint.yaml', '--timeout=20s'),
    ).to.include('deleted');
    expect((await harness.keys.find(key.status.lookupId)).revokedAt).to.be.an.instanceOf(Date);
    expect(await kubectl('get', 'apikeys,webhookendpoints', '-n', 'team-a', '-o', 'name')).to.equal('');
  });

  it('applies the AuditLogStream example (its Secret beside it) and the stream follows it, then deletes it', async () => {
    const applied = await kubectl('apply', '--validate=false', '-f', 'docs/examples/auditlogstream.yaml');
    expect(applied).to.include('auditlogstream.audittrail.dev/all-tenants-to-splunk created');
    const stream = () => kubectl('get', 'atstream', 'all-tenants-to-splunk', '-n', 'platform', '-o', 'json').then(JSON.parse);
    await waitFor(async () => (await stream()).status?.state === 'Active', 'the stream to be Active');
    const { status } = await stream();
    expect(await harness.streams.find(`kubernetes:platform/all-tenants-to-splunk/${(await stream()).metadata.uid}`)).to.deep.include({
      id: status.id,
      tenantIds: null,
      format: 'ocsf',
      filter: { action_prefixes: ['phi.', 'admin.'] },
    });
    // (Printer columns are the API server's to render, as a Table: crds.test.ts checks them in the CRD.)
    expect(await kubectl('delete', '-f', 'docs/examples/auditlogstream.yaml', '--timeout=20s')).to.include('deleted');
    const { rows } = await harness.db.pool.query('SELECT count(*)::int AS n FROM log_streams WHERE id = $1', [status.id]);
    expect(rows[0].n).to.equal(0);
  });

  it('applies server-side, refuses a conflicting manager, and lets it take the field with --force-conflicts', async () => {
    const manifest = 'docs/examples/apikey.yaml';
    expect(await kubectl('apply', '--server-side', '--validate=false', '-f', manifest)).to.include('serverside-applied');
    await waitFor(
      async () => JSON.parse(await kubectl('get', 'apikey', 'acme-siem', '-n', 'team-a', '-o', 'json')).status?.state === 'Active',
      'the key to be Active',
    );
    const object = JSON.parse(await kubectl('get', 'apikey', 'acme-siem', '-n', 'team-a', '-o', 'json', '--show-managed-fields'));
    expect(object.metadata.managedFields.map((entry: { manager: string }) => entry.manager)).to.include('kubectl');

    const other = readFileSync(manifest, 'utf8').replace('SIEM export for acme', 'owned by another pipeline');
    const otherFile = join(cacheDir, 'other.yaml');
    writeFileSync(otherFile, other);
    const conflict = await kubectl('apply', '--server-side', '--validate=false', '--field-manager=pipeline-b', '-f', otherFile).then(
      () => 'applied',
      (error: { stderr: string }) => error.stderr,
    );
    expect(conflict).to.match(/conflict/i);
    expect(
      await kubectl('apply', '--server-side', '--force-conflicts', '--validate=false', '--field-manager=pipeline-b', '-f', otherFile),
    ).to.include('serverside-applied');
    await waitFor(
      async () => (await harness.keys.find(object.status.lookupId)).description === 'owned by another pipeline',
      'the description applied in place',
    );
    await kubectl('delete', '-f', manifest, '--timeout=20s');
  });
});
