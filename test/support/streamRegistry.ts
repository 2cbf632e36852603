import type { Database } from '../../src/db/database.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { StreamRegistry } from '../../src/streams/streamRegistry.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { TEST_ENCRYPTION_KEY } from './service.ts';

/** The streams' registry on `pool`, taking the tests' loopback receivers (plain http, private addresses) as destinations. */
export function testStreamRegistry(pool: Database): StreamRegistry {
  return new StreamRegistry({
    db: pool,
    writer: new EventWriter(pool, WEBHOOK_FAN_OUT),
    secrets: new SecretBox(TEST_ENCRYPTION_KEY),
    policy: { allowHttp: true, allowPrivateTargets: true },
    destinations: { timeoutMs: 5_000, allowPrivateTargets: true },
  });
}
