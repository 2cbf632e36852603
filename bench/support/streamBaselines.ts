/**
 * The bare senders bench/streams.ts measures log streams against: the same records, cut into the same batches,
 * sent by this process with nothing behind them (no database, no lease, no preparation thread).
 *
 * - HEC with indexer acknowledgement: each batch POSTed, then `/services/collector/ack` asked on the channel
 *   with the stream's own schedule (splunkHec.ts: 20 ms, doubling to 1 s) until it says the batch is indexed,
 *   one batch at a time, as a careful sender must.
 * - AMQP: amqplib on one confirm channel, each record a persistent mandatory message, and waitForConfirms at
 *   the end of each batch, the stream's batches.
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { connect } from 'amqplib';
import { Agent } from 'undici';
import { ACK_POLL_FIRST_MS, ACK_POLL_MAX_MS } from '../../src/streams/destinations/splunkHec.ts';

/** Posts each batch (its HEC items' lines) and polls its ackId until indexed; returns the seconds it took. */
export async function bareHecWithAcks(hecUrl: string, token: string, batches: readonly string[][]): Promise<number> {
  const agent = new Agent({ connections: 1 });
  const channel = randomUUID();
  const headers = { authorization: `Splunk ${token}`, 'content-type': 'application/json', 'x-splunk-request-channel': channel };
  const started = performance.now();
  for (const items of batches) {
    const posted = await agent.request({
      origin: hecUrl,
      path: '/services/collector/event',
      method: 'POST',
      headers: { ...headers, 'content-encoding': 'gzip' },
      body: gzipSync(items.join('\n')),
    });
    const { ackId } = (await posted.body.json()) as { ackId: number };
    for (let waitMs = ACK_POLL_FIRST_MS; ; waitMs = Math.min(waitMs * 2, ACK_POLL_MAX_MS)) {
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      const asked = await agent.request({
        origin: hecUrl,
        path: '/services/collector/ack',
        method: 'POST',
        headers,
        body: JSON.stringify({ acks: [ackId] }),
      });
      const { acks } = (await asked.body.json()) as { acks: Record<string, boolean> };
      if (acks[String(ackId)]) break;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  await agent.close();
  return seconds;
}

/** Publishes each batch's records as messages and waits for the broker's confirms after each; returns the seconds. */
export async function bareAmqpPublisher(
  brokerUrl: string,
  exchange: string,
  routingKey: string,
  batches: readonly Buffer[][],
): Promise<number> {
  const model = await connect(brokerUrl);
  const channel = await model.createConfirmChannel();
  const properties = { persistent: true, mandatory: true, contentType: 'application/json', appId: 'audit-trail', type: 'audit.event' };
  const started = performance.now();
  for (const messages of batches) {
    for (const content of messages) {
      if (!channel.publish(exchange, routingKey, content, properties)) await new Promise((resolve) => channel.once('drain', resolve));
    }
    await channel.waitForConfirms();
  }
  const seconds = (performance.now() - started) / 1000;
  await model.close();
  return seconds;
}
