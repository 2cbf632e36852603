import { DeliveryRelay } from '../delivery/deliveryRelay.ts';
import { ReplayRunner } from '../delivery/replayRunner.ts';
import type { Role } from './role.ts';

/** The outbox relays: retries, replays and whatever ingest could not publish go to NATS from here. */
export const role: Role = {
  async start(parts) {
    const { config, db, metrics, releasers } = parts;
    const log = parts.log.child({ role: 'relay' });
    const bus = await parts.bus();
    // Replays are outbox work: the relays run them, one process per replay (delivery/replayRunner.ts).
    const replays = new ReplayRunner({
      // Each replay is claimed by a session advisory lock held on its connection.
      db: parts.sessionDb(),
      pollMs: config.delivery.relayPollMs,
      log: log.child({ component: 'replays' }),
      metrics,
    });
    const relay = new DeliveryRelay({
      db,
      databaseUrl: config.databaseSessionUrl,
      bus: bus.connection,
      names: bus.names,
      streamReplicas: config.natsStreamReplicas,
      ackWaitMs: config.delivery.ackWaitMs,
      pollMs: config.delivery.relayPollMs,
      log,
      metrics,
      onReplays: () => replays.wake(),
    });
    await relay.start();
    releasers.add('delivery relay', () => relay.stop());
    replays.start();
    releasers.add('replay runner', () => replays.stop());
    return {};
  },
};
