import type { JetStreamClient } from '@nats-io/jetstream';
import { headers, type MsgHdrs } from '@nats-io/transport-node';
import type { DueDelivery } from './deliveryOutbox.ts';

/**
 * The JetStream message that asks for attempts: `{"b":[["<delivery id>",<attempt>],...]}`, up to
 * MAX_DELIVERIES_PER_MESSAGE of them. Small on purpose: the worker reads the current endpoint and event from
 * Postgres, so a message never carries a secret or event data, and a stale entry is recognised by its
 * attempt number.
 *
 * Why batches: a JetStream message costs a publish and its acknowledgement in the relay, a store and a
 * delivery in NATS, and a receipt and an ack in the worker; one message per delivery made that the largest
 * cost of the delivery path. A batch is acknowledged when every delivery in it is settled, and a redelivered
 * batch repeats nothing: the worker skips entries whose attempt was already recorded.
 */
export interface DeliveryMessage {
  readonly deliveryId: string;
  readonly attempt: number;
}

/** Deliveries one message carries at most; a worker holds about 2,000 at a time. */
export const MAX_DELIVERIES_PER_MESSAGE = 50;

export function encodeDeliveryMessage(deliveries: readonly DeliveryMessage[]): string {
  return JSON.stringify({ b: deliveries.map((delivery) => [delivery.deliveryId, delivery.attempt]) });
}

/**
 * The message's deliveries, or undefined when it is not one of ours. The single-delivery form
 * `{"d":"<id>","a":<attempt>}` of earlier versions is still read, so messages published before an upgrade
 * are delivered after it.
 */
export function decodeDeliveryMessage(data: Uint8Array): DeliveryMessage[] | undefined {
  let value: { b?: unknown; d?: unknown; a?: unknown };
  try {
    value = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as typeof value;
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  const entries = Array.isArray(value.b) ? (value.b as unknown[]) : value.b === undefined ? [[value.d, value.a]] : undefined;
  if (!entries || entries.length === 0 || entries.length > MAX_DELIVERIES_PER_MESSAGE) return undefined;
  const deliveries: DeliveryMessage[] = [];
  for (const entry of entries) {
    if (!Array.isArray(entry) || entry.length !== 2) return undefined;
    const [deliveryId, attempt] = entry as [unknown, unknown];
    if (typeof deliveryId !== 'string' || !/^\d{1,19}$/.test(deliveryId)) return undefined;
    if (typeof attempt !== 'number' || !Number.isInteger(attempt) || attempt < 1) return undefined;
    deliveries.push({ deliveryId, attempt });
  }
  return deliveries;
}

/**
 * Nats-Msg-Id of a message: that of its first delivery, `<delivery>.<attempt>.<publication>`. A publication
 * of a delivery goes into exactly one message, so the id is unique per message: JetStream drops only true
 * copies (a publish the client retried), never an attempt that was deferred or parked and is due again.
 */
export function deliveryMessageId(first: DeliveryMessage, publication: number): string {
  return `${first.deliveryId}.${first.attempt}.${publication}`;
}

/**
 * The deployment a message was published by. Its worker settles only messages of its own deployment: a
 * message of another one (two deployments on one delivery stream) is left for its owner, not acknowledged
 * as "no such delivery".
 */
const DEPLOYMENT_HEADER = 'Audit-Trail-Deployment';

/** Headers of a message published by `deploymentId`; a fresh set per message, as the client adds its Nats-Msg-Id to them. */
function deliveryHeaders(deploymentId: string): MsgHdrs {
  const set = headers();
  set.set(DEPLOYMENT_HEADER, deploymentId);
  return set;
}

/** The deployment that published a message, or undefined for one published before messages named it. */
export function publisherOf(messageHeaders: MsgHdrs | undefined): string | undefined {
  const value = messageHeaders?.get(DEPLOYMENT_HEADER) ?? '';
  return value === '' ? undefined : value;
}

/** JetStream's answer to a publish is waited for this long; then the deliveries count as not published. */
export const PUBLISH_TIMEOUT_MS = 5_000;

/**
 * Publishes deliveries in messages of up to MAX_DELIVERIES_PER_MESSAGE, all at once; returns the deliveries
 * of the messages JetStream did not accept, and the first error. The relay and a publishing writer both
 * publish through here, so their messages are the same.
 */
export async function publishDeliveryMessages(
  js: JetStreamClient,
  target: { readonly subject: string; readonly deploymentId: string },
  due: readonly DueDelivery[],
): Promise<{ published: DueDelivery[]; failed: DueDelivery[]; error?: unknown }> {
  const messages: DueDelivery[][] = [];
  for (let start = 0; start < due.length; start += MAX_DELIVERIES_PER_MESSAGE)
    messages.push(due.slice(start, start + MAX_DELIVERIES_PER_MESSAGE));
  const results = await Promise.allSettled(
    messages.map((deliveries) =>
      js.publish(target.subject, encodeDeliveryMessage(deliveries.map(({ id, attempt }) => ({ deliveryId: id, attempt }))), {
        msgID: deliveryMessageId({ deliveryId: deliveries[0]!.id, attempt: deliveries[0]!.attempt }, deliveries[0]!.publication),
        headers: deliveryHeaders(target.deploymentId),
        timeout: PUBLISH_TIMEOUT_MS,
      }),
    ),
  );
  const failed = messages.filter((_, index) => results[index]!.status === 'rejected').flat();
  const published = messages.filter((_, index) => results[index]!.status === 'fulfilled').flat();
  const rejected = results.find((result) => result.status === 'rejected');
  return rejected ? { published, failed, error: rejected.reason } : { published, failed };
}
