import type { Database } from '../../src/db/database.ts';
import { ENDPOINT_DELIVERIES } from '../../src/delivery/endpointDeliveries.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../../src/webhooks/webhookRegistry.ts';
import { TEST_ENCRYPTION_KEY } from './service.ts';

/** The webhooks' registry on `pool`, taking the tests' loopback receivers (plain http, private addresses) as endpoints. */
export function testWebhookRegistry(pool: Database, writer = new EventWriter(pool, WEBHOOK_FAN_OUT)): WebhookRegistry {
  return new WebhookRegistry({
    db: pool,
    writer,
    deliveries: ENDPOINT_DELIVERIES,
    secrets: new SecretBox(TEST_ENCRYPTION_KEY),
    policy: { allowHttp: true, allowPrivateTargets: true },
  });
}
