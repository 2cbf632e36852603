/**
 * The JetStream message that asks for one attempt: `{"d":"<delivery id>","a":<attempt>}`. Small on
 * purpose: the worker reads the current endpoint and event from Postgres, so a message never carries a
 * secret or event data, and a stale message is recognised by its attempt number.
 */
export interface DeliveryMessage {
  readonly deliveryId: string;
  readonly attempt: number;
}

export function encodeDeliveryMessage(message: DeliveryMessage): string {
  return JSON.stringify({ d: message.deliveryId, a: message.attempt });
}

/** The message's content, or undefined when it is not one of ours. */
export function decodeDeliveryMessage(data: Uint8Array): DeliveryMessage | undefined {
  try {
    const value = JSON.parse(Buffer.from(data).toString('utf8')) as { d?: unknown; a?: unknown };
    if (typeof value.d !== 'string' || !/^\d{1,19}$/.test(value.d)) return undefined;
    if (typeof value.a !== 'number' || !Number.isInteger(value.a) || value.a < 1) return undefined;
    return { deliveryId: value.d, attempt: value.a };
  } catch {
    return undefined;
  }
}

/**
 * Nats-Msg-Id: unique per publication of an attempt, so JetStream drops only true copies (a publish the
 * client retried), never an attempt that was deferred and is due again.
 */
export function deliveryMessageId(message: DeliveryMessage, publication: number): string {
  return `${message.deliveryId}.${message.attempt}.${publication}`;
}
