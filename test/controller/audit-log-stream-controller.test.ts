import { expect } from 'chai';
import { Database } from '../../src/db/database.ts';
import { destinationOf } from '../../src/streams/streamSecrets.ts';
import { StreamRunner } from '../../src/streams/streamRunner.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import {
  GROUP,
  VERSION,
  mergePatch,
  resourceAddress,
  startControllerHarness,
  type ControllerHarness,
} from '../support/controller-harness.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { TEST_ENCRYPTION_KEY, testLogger } from '../support/service.ts';
import { SplunkHecReceiver, type HecEvent } from '../support/siem-receivers.ts';
import { waitFor } from '../support/wait.ts';

const NAMESPACE = 'platform';
const PLURAL = 'auditlogstreams';
/** Conditions that depend on the streams role and a resync to show: generous, the machine is shared. */
const SLOW = 45_000;

/**
 * AuditLogStream resources through client-node against the API stand-in, the controller applying them and
 * the streams role (in this process, on the same database, with a real sealer) delivering them to a
 * loopback Splunk HEC.
 */
describe('AuditLogStream controller', function () {
  this.timeout(120_000);
  let harness: ControllerHarness;
  let sealer: TestSealer;
  let pool: Database;
  let runner: StreamRunner;
  let hec: SplunkHecReceiver;

  before(async () => {
    harness = await startControllerHarness();
    sealer = await startTestSealer(harness.db.url, sealKeyPair().privateKey);
    pool = new Database({ url: harness.db.url, poolSize: 4, applicationName: 'streams role', log: testLogger() });
    hec = await new SplunkHecReceiver({ tokens: { good: {} } }).start();
    runner = new StreamRunner({
      db: pool,
      secrets: new SecretBox(TEST_ENCRYPTION_KEY),
      destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
      pollMs: 50,
      leaseMs: 5_000,
      capacity: 100,
      failingRetryMs: 200,
      log: testLogger(),
    });
    runner.start();
    harness.startController('replica-1');
    await waitFor(() => harness.controllers[0]!.isLeader, 'the controller to lead');
  });

  after(async () => {
    await runner?.stop();
    await hec?.stop();
    await sealer?.close();
    await pool?.close();
    await harness?.stop();
  });

  const address = (name: string) => ({ ...resourceAddress(NAMESPACE, PLURAL), name });
  const create = (name: string, spec: Record<string, unknown>) =>
    harness.custom.createNamespacedCustomObject({
      ...resourceAddress(NAMESPACE, PLURAL),
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'AuditLogStream', metadata: { name }, spec },
    });
  const get = (name: string) => harness.custom.getNamespacedCustomObject(address(name));
  const patch = (name: string, body: object) => harness.custom.patchNamespacedCustomObject({ ...address(name), body }, mergePatch);
  /** A Secret labelled for streams (their owner's consent), unless `labelled` is false. */
  const putSecret = async (name: string, data: Record<string, string>, labelled = true) => {
    const labels: Record<string, string> = labelled ? { 'audittrail.dev/stream-credentials': 'true' } : {};
    const body = { metadata: { name, namespace: NAMESPACE, labels }, stringData: data };
    const existing = await harness.core.readNamespacedSecret({ name, namespace: NAMESPACE }).catch(() => undefined);
    if (existing) await harness.core.replaceNamespacedSecret({ name, namespace: NAMESPACE, body });
    else await harness.core.createNamespacedSecret({ namespace: NAMESPACE, body });
  };
  const condition = (object: any, type: string) => object.status?.conditions?.find((item: { type: string }) => item.type === type);
  const managedBy = async (name: string) => `kubernetes:${NAMESPACE}/${name}/${(await get(name)).metadata.uid}`;
  const events = async (name: string, reason: string) =>
    (await harness.core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: `involvedObject.name=${name},reason=${reason}` })).items;
  const delivered = (tenantId: string, where: (event: HecEvent) => boolean = () => true) =>
    hec.events.filter((event) => event.sourcetype?.startsWith('audit-trail:native') && event.event.tenant_id === tenantId && where(event));
  /** Events written and sealed: the stream follows the sealed trail. */
  const write = async (tenantId: string, count: number, action = 'phi.read') => {
    const written = Array.from({ length: count }, () => newEvent({ tenantId, action }));
    await seedEvents(harness.db.url, written);
    await sealer.sealNow();
    return written.map((event) => event.eventId);
  };
  const arrived = (ids: readonly string[]) => {
    const seen = new Set(hec.events.map((event) => event.event?.event_id));
    return ids.every((id) => seen.has(id));
  };

  it('shows a missing Secret as Stalled, then creates the stream once the Secret exists, and it delivers its tenants only', async () => {
    await create('siem', {
      tenantIds: ['acme'],
      destination: { type: 'splunk_hec', url: hec.url, index: 'audit', secretRef: { name: 'hec-credentials' } },
      startAt: '2020-01-01T00:00:00Z',
    });
    await waitFor(async () => condition(await get('siem'), 'Stalled')?.reason === 'SecretNotFound', 'Stalled: SecretNotFound', SLOW);
    expect(await harness.streams.find(await managedBy('siem'))).to.equal(undefined);

    await putSecret('hec-credentials', { token: 'good' });
    await waitFor(async () => condition(await get('siem'), 'Ready')?.status === 'True', 'Ready=True', SLOW);
    const object = await get('siem');
    expect(object.status).to.include({ state: 'Active', tenants: 'acme' });
    expect(object.status.id).to.match(/^str_[0-9a-f]{32}$/);
    expect(condition(object, 'Stalled')).to.equal(undefined);
    const stream = (await harness.streams.find(await managedBy('siem')))!;
    expect(stream).to.deep.include({ id: object.status.id, ownerTenantId: null, tenantIds: ['acme'], destinationType: 'splunk_hec' });
    expect(stream.destination).to.deep.equal({ type: 'splunk_hec', url: hec.url, index: 'audit' });
    expect(JSON.stringify(object)).not.to.include('good');
    expect(await events('siem', 'StreamCreated')).to.have.length(1);

    const ours = await write('acme', 5);
    const theirs = await write('globex', 3);
    await waitFor(() => arrived(ours), "acme's events at the HEC", SLOW);
    expect(delivered('acme').map((event) => event.event.event_id)).to.include.members(ours);
    expect(hec.events.filter((event) => theirs.includes(event.event?.event_id))).to.deep.equal([]);
    expect(delivered('acme').every((event) => event.index === 'audit')).to.equal(true);
    expect(hec.requests.every((request) => request.headers.authorization === 'Splunk good')).to.equal(true);
  });

  it('applies a spec edit in place: same stream and position, the new index and filter for what follows', async () => {
    const before = (await get('siem')).status.id;
    await patch('siem', { spec: { destination: { index: 'audit-phi' }, filter: { actionPrefixes: ['phi.'] } } });
    await waitFor(async () => (await harness.streams.find(await managedBy('siem')))?.destination.index === 'audit-phi', 'the update');
    const stream = (await harness.streams.find(await managedBy('siem')))!;
    expect(stream.id).to.equal(before);
    expect(stream.filter).to.deep.equal({ action_prefixes: ['phi.'] });
    expect(await events('siem', 'StreamUpdated')).to.have.length(1);

    const phi = await write('acme', 2, 'phi.read');
    const other = await write('acme', 2, 'user.login');
    await waitFor(() => arrived(phi), 'the PHI events', SLOW);
    expect(delivered('acme', (event) => phi.includes(event.event.event_id)).every((event) => event.index === 'audit-phi')).to.equal(true);
    // The stream read past the other two (they are before the last PHI one in the trail) without sending them.
    await waitFor(async () => (await harness.streams.state(stream)).lagEvents === 0, 'the stream to catch up', SLOW);
    expect(hec.events.filter((event) => other.includes(event.event?.event_id))).to.deep.equal([]);
  });

  it('picks up a rotated Secret: the stream sends with the new token', async () => {
    hec.tokens.set('rotated', {});
    await putSecret('hec-credentials', { token: 'rotated' });
    const box = new SecretBox(TEST_ENCRYPTION_KEY);
    await waitFor(
      async () =>
        (destinationOf((await harness.streams.find(await managedBy('siem')))!, box).destination as { token: string }).token === 'rotated',
      'the new token in the stream',
      SLOW,
    );
    hec.tokens.delete('good');
    const after = hec.requests.length;
    const ids = await write('acme', 3);
    await waitFor(() => arrived(ids), 'the events sent with the new token', SLOW);
    expect(hec.requests.slice(after).map((request) => request.headers.authorization)).to.include('Splunk rotated');
    expect(condition(await get('siem'), 'Ready')?.status).to.equal('True');
  });

  it('shows a destination that refuses the credentials as Stalled and failing, with an Event, and resumes once they are fixed', async () => {
    await putSecret('wrong-credentials', { token: 'not-a-token' });
    await create('refused', {
      tenantIds: ['initech'],
      destination: { type: 'splunk_hec', url: hec.url, secretRef: { name: 'wrong-credentials' } },
      startAt: '2020-01-01T00:00:00Z',
    });
    const ids = await write('initech', 4);
    await waitFor(async () => condition(await get('refused'), 'Stalled')?.status === 'True', 'Stalled=True', SLOW);
    const object = await get('refused');
    expect(condition(object, 'Stalled')).to.include({ reason: 'DestinationRefused' });
    expect(condition(object, 'Ready')).to.include({ status: 'False', reason: 'DestinationRefused' });
    expect(object.status.state).to.equal('Failing');
    expect(object.status.lastError).to.include('403');
    expect(JSON.stringify(object)).not.to.include('not-a-token');
    await waitFor(async () => (await events('refused', 'DestinationRefused')).length > 0, 'the Warning Event', SLOW);
    expect((await events('refused', 'DestinationRefused'))[0]!.type).to.equal('Warning');
    expect(arrived(ids)).to.equal(false);

    await putSecret('wrong-credentials', { token: 'rotated' });
    await waitFor(() => arrived(ids), 'the held-back events once the token is right', SLOW);
    await waitFor(async () => condition(await get('refused'), 'Ready')?.status === 'True', 'Ready=True again', SLOW);
    expect((await get('refused')).status.state).to.equal('Active');
  });

  it('deletes the stream, and its positions, with the resource', async () => {
    const owner = await managedBy('refused');
    const { id } = (await get('refused')).status;
    await harness.custom.deleteNamespacedCustomObject(address('refused'));
    await waitFor(async () => (await harness.streams.find(owner)) === undefined, 'the stream to go', SLOW);
    await waitFor(
      async () =>
        (await harness.custom.listNamespacedCustomObject(resourceAddress(NAMESPACE, PLURAL))).items.every(
          (item: any) => item.metadata.name !== 'refused',
        ),
      'the resource to go (finalizer removed)',
      SLOW,
    );
    const { rows } = await harness.db.pool.query('SELECT count(*)::int AS n FROM log_stream_positions WHERE stream_id = $1', [id]);
    expect(rows[0].n).to.equal(0);
  });

  it('reads only a Secret labelled for streams: any other is refused (Stalled SecretNotLabelled) and nothing is created', async () => {
    await putSecret('database-password', { token: 'the-database-password' }, false);
    await create('exfiltrate', {
      tenantIds: ['acme'],
      destination: { type: 'splunk_hec', url: hec.url, secretRef: { name: 'database-password' } },
    });
    await waitFor(
      async () => condition(await get('exfiltrate'), 'Stalled')?.reason === 'SecretNotLabelled',
      'Stalled: SecretNotLabelled',
      SLOW,
    );
    const object = await get('exfiltrate');
    expect(condition(object, 'Stalled').message).to.include('kubectl label secret database-password');
    expect(JSON.stringify(object)).not.to.include('the-database-password');
    expect(await harness.streams.find(await managedBy('exfiltrate'))).to.equal(undefined);
    expect(await events('exfiltrate', 'SecretNotLabelled')).to.have.length(1);
    // Its owner consents: the stream is created.
    await putSecret('database-password', { token: 'good' });
    await waitFor(async () => condition(await get('exfiltrate'), 'Ready')?.status === 'True', 'Ready=True once labelled', SLOW);
    await harness.custom.deleteNamespacedCustomObject(address('exfiltrate'));
  });

  it('takes an AMQP destination, its password from the Secret, and the OCSF release of the records', async () => {
    await putSecret('broker-credentials', { password: 'broker-secret' });
    await create('to-rabbit', {
      allTenants: true,
      destination: {
        type: 'amqp',
        url: 'amqp://127.0.0.1:5672',
        username: 'guest',
        exchange: 'audit',
        routingKey: 'audit.{tenant}',
        secretRef: { name: 'broker-credentials' },
      },
      format: 'ocsf',
      ocsfVersion: '1.3.0',
      paused: true,
    });
    await waitFor(async () => (await harness.streams.find(await managedBy('to-rabbit'))) !== undefined, 'the stream', SLOW);
    const stream = (await harness.streams.find(await managedBy('to-rabbit')))!;
    expect(stream).to.include({ destinationType: 'amqp', format: 'ocsf', ocsfVersion: '1.3.0' });
    expect(stream.destination).to.deep.equal({
      type: 'amqp',
      url: 'amqp://127.0.0.1:5672',
      username: 'guest',
      exchange: 'audit',
      routing_key: 'audit.{tenant}',
    });
    expect(destinationOf(stream, new SecretBox(TEST_ENCRYPTION_KEY)).destination).to.include({ password: 'broker-secret' });
  });

  it('refuses a spec the public API would refuse (Stalled InvalidSpec), and creates nothing', async () => {
    await putSecret('s3-credentials', { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret' });
    await create('bad-bucket', {
      allTenants: true,
      destination: { type: 's3', bucket: 'Not_A_Bucket', prefix: 'audit', region: 'eu-west-1', secretRef: { name: 's3-credentials' } },
    });
    await waitFor(async () => condition(await get('bad-bucket'), 'Stalled')?.reason === 'InvalidSpec', 'Stalled: InvalidSpec', SLOW);
    expect(condition(await get('bad-bucket'), 'Stalled').message).to.include('destination.bucket');
    expect(await harness.streams.find(await managedBy('bad-bucket'))).to.equal(undefined);
  });
});
