import type { JsMsg } from '@nats-io/jetstream';
import type { DeliveryMessage } from './deliveryMessage.ts';
import type { StrayMessages } from './strayMessages.ts';

/**
 * A JetStream message (one stream sequence) and how many of its deliveries are still being worked on. A
 * copy of the message that JetStream redelivers while we hold it is folded into its ticket, never given
 * one of its own (see HeldMessages.refresh).
 */
interface Ticket {
  /** The latest copy received: acknowledgements and keep-alives go to it. */
  message: JsMsg;
  unsettled: number;
  /** Set when a delivery of the message must be tried again: once all are settled, the message is
   * negatively acknowledged with this delay and comes back whole (entries already recorded are skipped). */
  redeliverAfterMs: number | undefined;
  /** The message names this deployment as its publisher; false for messages of earlier versions. */
  readonly provablyOurs: boolean;
  /** A delivery of the message is not in our database and the message is not provably ours: leave it. */
  stray: boolean;
}

/** One delivery of a message, from receipt until its outcome is committed (or it is given back). */
export interface Held {
  readonly ticket: Ticket;
  readonly deliveryId: string;
  readonly attempt: number;
}

/**
 * The delivery worker's messages from receipt to settlement: which deliveries it holds, for which message,
 * and when a message is acknowledged (with its last delivery), given back for redelivery, or left to
 * another deployment. No I/O but the message's own acknowledgements.
 */
export class HeldMessages {
  private readonly strays: StrayMessages;
  private readonly held = new Map<string, Held>();
  /** By stream sequence. */
  private readonly tickets = new Map<number, Ticket>();

  constructor(strays: StrayMessages) {
    this.strays = strays;
  }

  /** Deliveries held, whatever their stage. */
  get size(): number {
    return this.held.size;
  }

  /**
   * A copy of a message we hold: JetStream sent it again because our keep-alive did not reach it in time
   * (a NATS restart restores the consumer's older state and redelivers at once). The ticket we hold settles
   * it. Settling the copy on its own would acknowledge the stream message, deleting it from the work
   * queue, while deliveries of the first copy were still queued: had one of them then failed to be
   * recorded (its message negatively acknowledged for redelivery), or the worker died, nothing would
   * have been left to redeliver, and the delivery would have waited for the relay's sweep. Returns whether
   * the message was such a copy.
   */
  refresh(message: JsMsg): boolean {
    const holding = this.tickets.get(message.info.streamSequence);
    if (holding) holding.message = message;
    return holding !== undefined;
  }

  /**
   * Holds a new message's deliveries, returning those to work on. A delivery already held for another
   * message (the relay published it again) is skipped: that message, unacknowledged until its own
   * deliveries settle, stands for this one too. A message with nothing new is acknowledged at once.
   */
  take(message: JsMsg, deliveries: readonly DeliveryMessage[], provablyOurs: boolean): Held[] {
    const ticket: Ticket = { message, unsettled: 0, redeliverAfterMs: undefined, provablyOurs, stray: false };
    const taken: Held[] = [];
    for (const delivery of deliveries) {
      const key = heldKey(delivery);
      if (this.held.has(key)) continue;
      const held = { ticket, deliveryId: delivery.deliveryId, attempt: delivery.attempt };
      ticket.unsettled += 1;
      this.held.set(key, held);
      taken.push(held);
    }
    if (taken.length === 0) message.ack();
    else this.tickets.set(message.info.streamSequence, ticket);
    return taken;
  }

  /** Tells JetStream we are still working on every message held (queued, in flight, or being recorded). */
  keepAlive(): void {
    for (const ticket of this.tickets.values()) ticket.message.working();
  }

  /** Not in our database and the message is not provably ours: perhaps another deployment's; settle leaves it. */
  markStray(held: Held): void {
    held.ticket.stray = true;
  }

  /**
   * Done with one delivery of a message: its outcome is committed, or it was stale, or (with
   * `redeliverAfterMs`) it must be tried again. The message is acknowledged with its last delivery, unless
   * it is a stray, left for its owner.
   */
  settle(held: Held, redeliverAfterMs?: number): void {
    this.held.delete(heldKey(held));
    const ticket = held.ticket;
    if (redeliverAfterMs !== undefined) ticket.redeliverAfterMs = Math.max(ticket.redeliverAfterMs ?? 0, redeliverAfterMs);
    ticket.unsettled -= 1;
    if (ticket.unsettled > 0) return;
    this.tickets.delete(ticket.message.info.streamSequence);
    if (ticket.stray) this.strays.leave(ticket.message, undefined);
    else if (ticket.redeliverAfterMs === undefined) ticket.message.ack();
    else ticket.message.nak(ticket.redeliverAfterMs);
  }
}

function heldKey(delivery: { readonly deliveryId: string; readonly attempt: number }): string {
  return `${delivery.deliveryId}.${delivery.attempt}`;
}
