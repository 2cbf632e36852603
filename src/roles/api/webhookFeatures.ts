import { DeliveryCursorCodec } from '../../delivery/deliveryCursor.ts';
import { WebhookDeliveries } from '../../delivery/deliveryOperations.ts';
import { TestDeliveries } from '../../delivery/testDelivery.ts';
import { WebhookSender } from '../../delivery/webhookSender.ts';
import { operationalEventRoutes, operationalEventsOpenApi } from '../../http/routes/operationalEvents.ts';
import { streamRoutes, streamsOpenApi } from '../../http/routes/streams.ts';
import { webhookDeliveriesOpenApi, webhookDeliveryRoutes } from '../../http/routes/webhookDeliveries.ts';
import { webhookHealthOpenApi, webhookHealthRoutes } from '../../http/routes/webhookHealth.ts';
import { webhookRoutes } from '../../http/routes/webhooks.ts';
import { webhooksOpenApi } from '../../http/routes/webhooksOpenApi.ts';
import { StreamRegistry } from '../../streams/streamRegistry.ts';
import type { SharedParts } from '../sharedParts.ts';
import { destinationOptions } from '../streamsRole.ts';
import type { ApiFeature, Feature } from './apiFeature.ts';

/** Webhook endpoints, their test sends, deliveries, replays and health; log streams beside them. */
export const webhookFeatures: ApiFeature = async (parts, pepper) => {
  const { config, db } = parts;
  const registry = await parts.webhookRegistry('the api role');
  // Test sends go out from the api role, through a sender of its own with the workers' settings.
  const testSender = new WebhookSender({
    timeoutMs: config.delivery.timeoutMs,
    connectionsPerEndpoint: 1,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
  });
  parts.releasers.add('webhook test sender', () => testSender.close());
  const testDeliveries = new TestDeliveries({ registry, secrets: parts.secretBox('the api role'), sender: testSender });
  const deliveries = new WebhookDeliveries({ db, writer: await parts.writer(), cursors: new DeliveryCursorCodec(pepper) });
  return [
    // Before the endpoints' routes: its path would otherwise read as an endpoint id there.
    { router: operationalEventRoutes(db, pepper), openapi: operationalEventsOpenApi },
    { router: webhookRoutes(registry, testDeliveries), openapi: webhooksOpenApi({ allowHttp: config.webhookAllowHttp }) },
    await streamFeature(parts),
    { router: webhookDeliveryRoutes(deliveries), openapi: webhookDeliveriesOpenApi() },
    { router: webhookHealthRoutes(deliveries), openapi: webhookHealthOpenApi },
  ];
};

/** Log streams: their destinations, sealed secrets and test sends. */
async function streamFeature(parts: SharedParts): Promise<Feature> {
  const { config } = parts;
  const registry = new StreamRegistry({
    db: parts.db,
    writer: await parts.writer(),
    secrets: parts.secretBox('the api role'),
    policy: { allowHttp: config.webhookAllowHttp, allowPrivateTargets: config.webhookAllowPrivateTargets },
    destinations: destinationOptions(config),
  });
  return { router: streamRoutes(registry), openapi: streamsOpenApi({ allowHttp: config.webhookAllowHttp }) };
}
