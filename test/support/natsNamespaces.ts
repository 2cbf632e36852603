import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { BusNames } from '../../src/bus/jetStreamDefinitions.ts';

/**
 * Removes every JetStream stream the service may have made under a namespace a test or benchmark made up
 * (BusNames.streams: ingest, deliveries, signed heads), so that runs do not pile them up on the machine's
 * NATS: a checkout's suite had left 83 streams there, the signed heads of every file whose service ran a
 * sealer among them. Quietly nothing when that NATS is gone (a private one, removed) or a stream was never
 * made.
 */
export async function removeNamespaceStreams(natsUrl: string, namespace: string): Promise<void> {
  // With a namespace, the deployment id plays no part in the names.
  const names = new BusNames({ namespace, deploymentId: '' });
  const nc = await connect({ servers: natsUrl, reconnect: false }).catch(() => undefined);
  if (!nc) return;
  try {
    const jsm = await jetstreamManager(nc);
    for (const stream of names.streams()) await jsm.streams.delete(stream).catch(() => undefined);
  } finally {
    await nc.close();
  }
}
