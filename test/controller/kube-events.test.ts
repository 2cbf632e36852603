import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { EventRecorder } from '../../src/controller/kubeEvents.ts';
import { startKubeApiServer, type KubeApiServer } from '../support/kube-apiserver/server.ts';
import { testLogger } from '../support/service.ts';

/** The controller's Event recorder against the API stand-in: aggregation and the per-object rate, as client-go's. */
describe('Kubernetes Events of the controller', function () {
  this.timeout(20_000);
  let kube: KubeApiServer;
  let core: CoreV1Api;
  const object = (name: string) => ({ apiVersion: 'audittrail.dev/v1alpha1', kind: 'ApiKey', name, namespace: 'ev', uid: `uid-${name}` });
  const eventsOf = async (name: string) =>
    (await core.listNamespacedEvent({ namespace: 'ev', fieldSelector: `involvedObject.name=${name}` })).items;

  before(async () => {
    kube = await startKubeApiServer({ crdDirectories: ['crds'] });
    core = kube.kubeConfig().makeApiClient(CoreV1Api);
  });

  after(async () => {
    await kube?.stop();
  });

  it('counts a repeated event in the first Event object instead of creating another', async () => {
    let now = Date.parse('2026-05-01T10:00:00Z');
    const recorder = new EventRecorder(core, testLogger(), { component: 'audit-trail-controller', now: () => now });
    await recorder.record(object('a'), 'Warning', 'SecretConflict', 'Secret a exists');
    now += 30_000;
    await recorder.record(object('a'), 'Warning', 'SecretConflict', 'Secret a exists');
    now += 30_000;
    await recorder.record(object('a'), 'Warning', 'SecretConflict', 'Secret a exists');
    await recorder.record(object('a'), 'Normal', 'KeyMinted', 'Key 1a2b3c4d minted');
    const events = await eventsOf('a');
    expect(events.map((event) => [event.reason, event.count])).to.deep.equal([
      ['SecretConflict', 3],
      ['KeyMinted', 1],
    ]);
    const conflict = events[0]!;
    expect(conflict.firstTimestamp!.toISOString()).to.equal('2026-05-01T10:00:00.000Z');
    expect(conflict.lastTimestamp!.toISOString()).to.equal('2026-05-01T10:01:00.000Z');
    expect(conflict).to.deep.include({ type: 'Warning', source: { component: 'audit-trail-controller' } });
  });

  it('creates the Event again when the one it counted in has expired', async () => {
    const recorder = new EventRecorder(core, testLogger(), { component: 'audit-trail-controller' });
    await recorder.record(object('b'), 'Warning', 'SecretMissing', 'gone');
    await core.deleteNamespacedEvent({ name: (await eventsOf('b'))[0]!.metadata!.name!, namespace: 'ev' });
    await recorder.record(object('b'), 'Warning', 'SecretMissing', 'gone');
    expect((await eventsOf('b')).map((event) => event.count)).to.deep.equal([1]);
  });

  it('lets one object record a burst, then one event per refill period; the rest are dropped', async () => {
    let now = 0;
    const recorder = new EventRecorder(core, testLogger(), {
      component: 'audit-trail-controller',
      burst: 3,
      refillMs: 60_000,
      now: () => now,
    });
    for (let attempt = 0; attempt < 10; attempt += 1) await recorder.record(object('c'), 'Warning', 'OwnedByAnotherDeployment', 'not ours');
    expect((await eventsOf('c'))[0]!.count).to.equal(3);
    now += 60_000;
    await recorder.record(object('c'), 'Warning', 'OwnedByAnotherDeployment', 'not ours');
    await recorder.record(object('c'), 'Warning', 'OwnedByAnotherDeployment', 'not ours');
    expect((await eventsOf('c'))[0]!.count).to.equal(4);
    // Another object has its own allowance.
    await recorder.record(object('d'), 'Warning', 'OwnedByAnotherDeployment', 'not ours');
    expect(await eventsOf('d')).to.have.length(1);
  });
});
