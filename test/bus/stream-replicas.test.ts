import { expect } from 'chai';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connectBus, type BusConnection } from '../../src/bus/natsConnection.ts';
import { BusNames, deliveryConsumerDefinition, ensureConsumer, ingestConsumerDefinition } from '../../src/bus/jetStreamDefinitions.ts';
import { loadConfig } from '../../src/config/config.ts';
import { startNatsCluster, type PrivateNatsCluster } from '../support/private-services.ts';
import { testLogger } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

describe('JetStream streams on a three-node NATS cluster (NATS_STREAM_REPLICAS)', function () {
  this.timeout(120_000);
  let cluster: PrivateNatsCluster;
  let bus: BusConnection;
  let jsm: JetStreamManager;

  before(async () => {
    cluster = await startNatsCluster(3);
    bus = await connectBus(cluster.url, 'replicas test', testLogger());
    // A new cluster elects its JetStream meta leader first; until then JetStream requests time out.
    await waitFor(
      async () =>
        jetstreamManager(bus.nc, { timeout: 2_000 }).then(
          (manager) => {
            jsm = manager;
            return true;
          },
          () => false,
        ),
      'a JetStream meta leader',
      60_000,
      250,
    );
    // A leader can be elected before every peer has caught up with the meta group; until then a
    // three-replica stream finds "no suitable peers for placement" (seen on a loaded machine).
    await waitFor(
      async () =>
        jsm.streams.add({ name: 'PLACEMENT_PROBE', subjects: ['placement.probe'], num_replicas: 3 }).then(
          () => true,
          () => false,
        ),
      'the cluster to place a three-replica stream',
      60_000,
      500,
    );
    await jsm.streams.delete('PLACEMENT_PROBE');
  });

  after(async () => {
    await bus?.close();
    await cluster?.remove();
  });

  const replicasOf = async (stream: string) => {
    const info = await jsm.streams.info(stream);
    return { configured: info.config.num_replicas, peers: 1 + (info.cluster?.replicas?.length ?? 0) };
  };

  it('creates AUDIT_INGEST and AUDIT_DELIVERIES with three replicas, one per node', async () => {
    const { natsStreamReplicas } = loadConfig({ NATS_STREAM_REPLICAS: '3' });
    const names = new BusNames({ namespace: 'ha', deploymentId: 'ha0000000000' });
    await ensureConsumer(jsm, ingestConsumerDefinition(names, natsStreamReplicas));
    await ensureConsumer(jsm, deliveryConsumerDefinition(names, 30_000, natsStreamReplicas));
    expect(await replicasOf('HA_AUDIT_INGEST')).to.deep.equal({ configured: 3, peers: 3 });
    expect(await replicasOf('HA_AUDIT_DELIVERIES')).to.deep.equal({ configured: 3, peers: 3 });
  });

  it('raises the replicas of existing single-replica streams in place, keeping their messages', async () => {
    const names = new BusNames({ namespace: 'grow', deploymentId: 'grow00000000' });
    const single = ingestConsumerDefinition(names);
    await ensureConsumer(jsm, single);
    expect(await replicasOf('GROW_AUDIT_INGEST')).to.deep.equal({ configured: 1, peers: 1 });
    await bus.nc.request(names.ingestSubject('acme'), '{}').catch(() => undefined);
    await waitFor(async () => (await jsm.streams.info('GROW_AUDIT_INGEST')).state.messages === 1, 'the message to be stored');

    await ensureConsumer(jsm, ingestConsumerDefinition(names, 3));
    await waitFor(async () => (await replicasOf('GROW_AUDIT_INGEST')).peers === 3, 'three peers');
    expect((await jsm.streams.info('GROW_AUDIT_INGEST')).state.messages).to.equal(1);
    expect((await jsm.consumers.info('GROW_AUDIT_INGEST', single.consumer.durable_name)).name).to.equal('audit-ingest');
  });
});
