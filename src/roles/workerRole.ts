import { connectRedis } from '../auth/redisConnection.ts';
import { DeliveryWorker } from '../delivery/deliveryWorker.ts';
import { RetryPolicy } from '../delivery/retryPolicy.ts';
import { WebhookSender } from '../delivery/webhookSender.ts';
import type { Role } from './role.ts';

/** The delivery workers: members of one durable pull consumer, each sending signed POSTs to receivers. */
export const role: Role = {
  async start(parts) {
    const { config, releasers } = parts;
    const secrets = parts.secretBox('the worker role');
    const [writer, bus] = [await parts.writer(), await parts.bus()];
    const sender = new WebhookSender({
      timeoutMs: config.delivery.timeoutMs,
      connectionsPerEndpoint: config.delivery.endpointConcurrency,
      allowPrivateTargets: config.webhookAllowPrivateTargets,
    });
    releasers.add('webhook sender', () => sender.close());
    // Endpoints' rate limits are shared through Redis; without it each worker keeps its own (endpointRateLimit.ts).
    const redis = connectRedis(config.redisUrl, parts.log.child({ component: 'redis' }), config.redisTls, config.redisSentinel);
    releasers.add('redis connection', () => void redis.disconnect());
    const worker = new DeliveryWorker({
      db: parts.db,
      databaseUrl: config.databaseSessionUrl,
      bus: bus.connection,
      names: bus.names,
      streamReplicas: config.natsStreamReplicas,
      writer,
      secrets,
      sender,
      retryPolicy: new RetryPolicy(config.delivery.scheduleMs),
      ackWaitMs: config.delivery.ackWaitMs,
      endpointConcurrency: config.delivery.endpointConcurrency,
      maxSockets: config.delivery.maxSockets,
      log: parts.log.child({ role: 'worker' }),
      metrics: parts.metrics,
      redis,
    });
    await worker.start();
    releasers.add('delivery worker', () => worker.stop());
    return {};
  },
};
