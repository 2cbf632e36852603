import { invalidCursor, SignedCursor } from '../events/cursor.ts';
import type { DeliveryLogPosition } from './deliveryLog.ts';

/** What a delivery-log cursor is bound to: the tenant, the endpoint and every filter of the query. */
export interface DeliveryLogBinding {
  readonly tenantId: string;
  readonly endpointId: string;
  readonly status: string | undefined;
  readonly sinceMs: number | undefined;
  readonly untilMs: number | undefined;
}

/**
 * Page cursors of the delivery log, by the event list's rules (events/cursor.ts): opaque, authenticated,
 * bound to the tenant, the endpoint and the filters; a cursor of another query, or of the event list, is
 * the same 422 as there.
 */
export class DeliveryCursorCodec {
  private readonly signed: SignedCursor;

  constructor(pepper: string) {
    this.signed = new SignedCursor(pepper, 'delivery-cursor-v1');
  }

  encode(position: DeliveryLogPosition, binding: DeliveryLogBinding): string {
    return this.signed.encode(`1:${position.createdAtUs}:${position.id}`, bindingText(binding));
  }

  decode(cursor: string, binding: DeliveryLogBinding): DeliveryLogPosition {
    const [version, createdAtUs, id, ...rest] = (this.signed.decode(cursor, bindingText(binding)) ?? '').split(':');
    if (version !== '1' || rest.length > 0 || !/^-?\d{1,19}$/.test(createdAtUs ?? '') || !/^\d{1,19}$/.test(id ?? ''))
      throw invalidCursor();
    return { createdAtUs: createdAtUs!, id: id! };
  }
}

function bindingText(binding: DeliveryLogBinding): string {
  return JSON.stringify([binding.tenantId, binding.endpointId, binding.status ?? null, binding.sinceMs ?? null, binding.untilMs ?? null]);
}
