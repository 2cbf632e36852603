import { endpointHealth, type EndpointHealth } from './endpointHealth.ts';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import type { Queryable } from '../db/database.ts';
import type { Actor } from '../events/adminEvent.ts';
import type { DeliveryCursorCodec } from './deliveryCursor.ts';
import {
  findEndpointDelivery,
  listDeliveryAttempts,
  listEndpointDeliveries,
  type AttemptEntry,
  type DeliveryLogEntry,
  DELIVERY_STATES as ALL_STATES,
  type DeliveryState,
} from './deliveryLog.ts';
import { lockDeliveryState, scheduleManualRetry } from './deliveryRetry.ts';
import { parseTimestampCeilMs } from '../events/eventFields.ts';
import { filterFieldsSchema } from '../events/eventFilters.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { findReplay, findRunningReplay, insertReplay, type Replay } from './replayStore.ts';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import { checkTimeWindow, pageOf, type PageInfo, rowsToRead } from '../platform/paging.ts';
import { webhookEvent } from '../webhooks/webhookEvents.ts';
import type { WebhookEndpoint } from '../webhooks/webhookEndpoint.ts';
import { findEndpoint, lockTenantEndpoints } from '../webhooks/webhookStore.ts';
import { systemClock } from '../platform/clock.ts';

/** Delivery ids on the API: `dlv_` and the row's number. */
export const DELIVERY_ID_PATTERN = /^dlv_([1-9][0-9]{0,17})$/;
export const REPLAY_ID_PATTERN = /^rpl_[0-9a-f]{32}$/;
/** The longest range one replay may cover. */
const MAX_REPLAY_RANGE_MS = 90 * 86_400_000;
/** How far past now `until` may reach: a client's clock a little ahead is not an error. */
const UNTIL_FUTURE_TOLERANCE_MS = 60_000;

/**
 * The statuses of the API. `cancelled` rows (deliveries stopped because their endpoint was disabled while
 * they waited) are `failed` to clients: nothing more will be attempted and the event did not arrive.
 * `parked` rows (waiting for a hung endpoint to finish a request) and `queued` ones (waiting for their turn
 * at an ordered endpoint) are `pending`: their next attempt is to come.
 */
export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
const STATES_OF: Record<DeliveryStatus, readonly DeliveryState[]> = {
  pending: ['pending', 'parked', 'queued'],
  succeeded: ['succeeded'],
  failed: ['failed', 'cancelled'],
};

export function statusOf(state: DeliveryState): DeliveryStatus {
  return state === 'cancelled' ? 'failed' : state === 'parked' || state === 'queued' ? 'pending' : state;
}

export const replayRequestSchema = z
  .strictObject({
    since: filterFieldsSchema.since.meta({ description: 'Inclusive start of the range of event timestamps (RFC 3339).' }),
    until: filterFieldsSchema.until.meta({ description: 'Exclusive end of the range (RFC 3339); at most 90 days after since.' }),
    only_undelivered: z.boolean().default(true).meta({ description: 'Skip events already delivered successfully to this endpoint.' }),
  })
  .meta({ id: 'ReplayRequest' });

export interface DeliveryLogRequest {
  readonly status?: DeliveryStatus;
  readonly sinceMs?: number;
  readonly untilMs?: number;
  readonly limit: number;
  readonly cursor?: string;
}

export interface DeliveryLogPage {
  readonly deliveries: DeliveryLogEntry[];
  readonly page: PageInfo;
}

export interface WebhookDeliveriesOptions {
  readonly db: Queryable;
  /** Retries and replays are recorded with their admin.webhook.* event in one transaction. */
  readonly writer: EventWriter;
  readonly cursors: DeliveryCursorCodec;
}

/**
 * The delivery log, manual retries and replays of an endpoint (docs/webhooks.md). Every path follows the
 * registry's rules: unknown endpoint 404, another tenant's 403. None changes an endpoint's configuration,
 * so all of them are allowed on endpoints a Kubernetes WebhookEndpoint resource manages.
 */
export class WebhookDeliveries {
  private readonly db: Queryable;
  private readonly writer: EventWriter;
  private readonly cursors: DeliveryCursorCodec;

  constructor(options: WebhookDeliveriesOptions) {
    this.db = options.db;
    this.writer = options.writer;
    this.cursors = options.cursors;
  }

  async list(tenantId: string, endpointId: string, request: DeliveryLogRequest): Promise<DeliveryLogPage> {
    await this.ownedEndpoint(this.db, tenantId, endpointId);
    const binding = { tenantId, endpointId, status: request.status, sinceMs: request.sinceMs, untilMs: request.untilMs };
    const after = request.cursor === undefined ? undefined : this.cursors.decode(request.cursor, binding);
    const rows = await listEndpointDeliveries(this.db, {
      endpointId,
      states: request.status ? STATES_OF[request.status] : ALL_STATES,
      sinceMs: request.sinceMs,
      untilMs: request.untilMs,
      after,
      limit: rowsToRead(request.limit),
    });
    const { rows: deliveries, page } = pageOf(rows, request.limit, (last) => this.cursors.encode(last.position, binding));
    return { deliveries, page };
  }

  async get(tenantId: string, endpointId: string, deliveryRef: string): Promise<{ delivery: DeliveryLogEntry; attempts: AttemptEntry[] }> {
    await this.ownedEndpoint(this.db, tenantId, endpointId);
    const delivery = await findEndpointDelivery(this.db, endpointId, deliveryNumber(deliveryRef));
    if (!delivery) throw noSuchDelivery();
    return { delivery, attempts: await listDeliveryAttempts(this.db, delivery.id) };
  }

  /**
   * One more attempt, at once, for a failed or pending delivery; 409 already_delivered for a succeeded
   * one, 409 endpoint_inactive when the endpoint is disabled (its deliveries are cancelled, and stay so).
   */
  async retry(tenantId: string, endpointId: string, deliveryRef: string, actor: Actor): Promise<DeliveryLogEntry> {
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwnedEndpoint(client, tenantId, endpointId);
      const deliveryId = deliveryNumber(deliveryRef);
      const state = await lockDeliveryState(client, endpointId, deliveryId);
      if (state === undefined) throw noSuchDelivery();
      if (state === 'succeeded')
        throw new ConflictError('already_delivered', 'This delivery has already succeeded; there is nothing to retry.');
      if (!endpoint.active) throw endpointInactive();
      await scheduleManualRetry(client, deliveryId, endpoint.ordered);
      const delivery = (await findEndpointDelivery(client, endpointId, deliveryId))!;
      return {
        result: delivery,
        events: [
          webhookEvent('admin.webhook.retry_delivery', endpoint, actor, { delivery_id: `dlv_${deliveryId}`, event_id: delivery.eventId }),
        ],
      };
    });
  }

  /** Starts a replay (the relay role runs it: delivery/replayRunner.ts). 422 for a bad range, 409 when one runs. */
  async startReplay(tenantId: string, endpointId: string, input: unknown, actor: Actor): Promise<Replay> {
    const request = parseInput(replayRequestSchema, input);
    const sinceMs = parseTimestampCeilMs(request.since)!;
    const untilMs = parseTimestampCeilMs(request.until)!;
    checkTimeWindow(sinceMs, untilMs);
    if (untilMs - sinceMs > MAX_REPLAY_RANGE_MS) throw ValidationError.single('until', 'must be at most 90 days after since');
    if (untilMs > systemClock.now() + UNTIL_FUTURE_TOLERANCE_MS) throw ValidationError.single('until', 'must not be in the future');
    return this.writer.recordWith('internal', async (client) => {
      const endpoint = await this.lockOwnedEndpoint(client, tenantId, endpointId);
      if (!endpoint.active) throw endpointInactive();
      if (endpoint.kind === 'operational') {
        throw new ConflictError(
          'endpoint_operational',
          "An operational endpoint receives notices, not the trail's events: there is nothing to replay to it.",
        );
      }
      const running = await findRunningReplay(client, endpointId);
      if (running)
        throw new ConflictError('replay_running', `Replay ${running.id} of this endpoint is still running; wait for it to complete.`);
      const replay = await insertReplay(client, {
        id: `rpl_${randomBytes(16).toString('hex')}`,
        endpointId,
        tenantId,
        sinceMs,
        untilMs,
        onlyUndelivered: request.only_undelivered,
      });
      const details = {
        replay_id: replay.id,
        since: replay.since.toISOString(),
        until: replay.until.toISOString(),
        only_undelivered: replay.onlyUndelivered,
      };
      return { result: replay, events: [webhookEvent('admin.webhook.replay', endpoint, actor, details)] };
    });
  }

  /** How the endpoint is doing, from its recent attempts (endpointHealth.ts). */
  async health(tenantId: string, endpointId: string): Promise<EndpointHealth> {
    await this.ownedEndpoint(this.db, tenantId, endpointId);
    return endpointHealth(this.db, endpointId);
  }

  async getReplay(tenantId: string, endpointId: string, replayRef: string): Promise<Replay> {
    await this.ownedEndpoint(this.db, tenantId, endpointId);
    const replay = REPLAY_ID_PATTERN.test(replayRef) ? await findReplay(this.db, endpointId, replayRef) : undefined;
    if (!replay) throw new NotFoundError('No such replay of this endpoint.');
    return replay;
  }

  /** The registry's rules: unknown → 404; another tenant's → 403. */
  private async ownedEndpoint(db: Queryable, tenantId: string, endpointId: string, lock = false): Promise<WebhookEndpoint> {
    const endpoint = await findEndpoint(db, endpointId, { lock });
    if (!endpoint) throw new NotFoundError('No such webhook endpoint.');
    if (endpoint.tenantId !== tenantId) throw new ForbiddenError('The webhook endpoint belongs to another tenant.');
    return endpoint;
  }

  /** As the registry's changes do: the tenant's endpoint lock first, then the endpoint's row. */
  private async lockOwnedEndpoint(client: pg.PoolClient, tenantId: string, endpointId: string): Promise<WebhookEndpoint> {
    await lockTenantEndpoints(client, tenantId);
    return this.ownedEndpoint(client, tenantId, endpointId, true);
  }
}

/** The row number of a delivery id; a malformed id names no delivery (404, like an unknown one). */
function deliveryNumber(ref: string): string {
  const match = DELIVERY_ID_PATTERN.exec(ref);
  if (!match) throw noSuchDelivery();
  return match[1]!;
}

function noSuchDelivery(): NotFoundError {
  return new NotFoundError('No such delivery of this endpoint.');
}

function endpointInactive(): ConflictError {
  return new ConflictError('endpoint_inactive', 'The endpoint is disabled; nothing more is delivered to it.');
}
