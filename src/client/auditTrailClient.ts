/**
 * A typed client for the public API (`/api/v2/public`), for customers' TypeScript and JavaScript code.
 * It depends on nothing but the platform's fetch, retries 429 (and 503) with exponential backoff and full
 * jitter while honouring Retry-After, and turns the cursor and export walks into async iterators.
 */

import { ApiTransport, filterValues, ndjsonLines, toQuery, type ClientOptions } from './apiTransport.ts';
import type { AuditEvent } from './auditEvent.ts';
import { followLive, type LiveOptions } from './liveEvents.ts';
import type { CreatedLogStream, LogStream, StreamCreation, StreamTestResult } from './logStreams.ts';
import type { PortalSession, PortalSessionLink } from './portalShapes.ts';
import type {
  DeliveryAttempt,
  DeliveryFilters,
  DeliveryPage,
  OperationalEventPage,
  RotatedWebhookSecret,
  WebhookChanges,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookPublicKey,
  WebhookRegistration,
  WebhookReplay,
  WebhookSecret,
  WebhookTestResult,
} from './webhookShapes.ts';

// This module is an entry of its own (@audit-trail/client/auditTrailClient, for a bundle without the verifier's
// node:crypto): the error it throws and its options come from here too. Its types are on the package's entry
// (type imports cost a bundle nothing).
export { AuditTrailApiError, AuditTrailUnreachableError, type ClientOptions } from './apiTransport.ts';

export interface EventFilters {
  action?: string;
  /** An action family, matched as webhook filters are: `phi.` matches phi.read; `phi` that and phi itself. */
  action_prefix?: string;
  /** What this user did: exact match on the event's user_id. */
  user_id?: string;
  resource_type?: string;
  /** Who touched this record: exact match on the event's resource_id (with resource_type or without). */
  resource_id?: string;
  phi_involved?: boolean;
  /** Inclusive lower bound: a Date or an RFC 3339 string. */
  since?: Date | string;
  /** Exclusive upper bound: a Date or an RFC 3339 string. */
  until?: Date | string;
}

/** The list's own parameters beside the filters: its search (docs/api.md "Search") and its page size. */
export interface ListOptions {
  /** A part of the event's id, action, user_id, resource_type or resource_id, in any case. */
  q?: string;
  limit?: number;
}

export interface EventPage {
  events: AuditEvent[];
  /** searched_to: a search's page whose walk stopped short; next_cursor searches on. */
  page: { limit: number; returned: number; next_cursor: string | null; has_more: boolean; searched_to?: string };
}

export class AuditTrailClient {
  private readonly api: ApiTransport;

  constructor(options: ClientOptions) {
    this.api = new ApiTransport(options);
  }

  /** One page of events, newest first. */
  async listPage(filters: EventFilters & ListOptions & { cursor?: string } = {}): Promise<EventPage> {
    const { limit, cursor, ...rest } = filters;
    const query = toQuery({ ...filterValues(rest), limit: limit?.toString(), cursor });
    return (await this.api.request('GET', `/audit/events${query}`)).json() as Promise<EventPage>;
  }

  /** Every page of the window, following next_cursor until has_more is false. */
  async *listPages(filters: EventFilters & ListOptions = {}): AsyncGenerator<EventPage> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listPage({ ...filters, cursor });
      yield page;
      if (!page.page.has_more || !page.page.next_cursor) return;
      cursor = page.page.next_cursor;
    }
  }

  /** Every event of the window, one at a time. */
  async *listEvents(filters: EventFilters & ListOptions = {}): AsyncGenerator<AuditEvent> {
    for await (const page of this.listPages(filters)) yield* page.events;
  }

  /**
   * The tenant's events as they are sealed (GET /audit/events/live), oldest first, for as long as you
   * iterate: `for await (const event of client.live({ action: 'phi.read', signal }))`. A dropped connection
   * is reconnected with the id of the last event yielded, so no event is lost or repeated; pass an
   * event's `event_id` as `lastEventId` to resume after it in a later process. Aborting `signal` (or
   * leaving the loop) closes the stream. Scope audit:read.
   */
  live(options: EventFilters & LiveOptions = {}): AsyncGenerator<AuditEvent> {
    const { lastEventId, signal, ...filters } = options;
    return followLive(this.api, `/audit/events/live${toQuery(filterValues(filters))}`, { lastEventId, signal });
  }

  /** One event; an unknown id (or another tenant's) rejects with status 404. */
  async getEvent(eventId: string): Promise<AuditEvent> {
    return (await this.api.request('GET', `/audit/events/${encodeURIComponent(eventId)}`)).json() as Promise<AuditEvent>;
  }

  /**
   * Every event matching the filters, streamed as NDJSON and walking past the 10,000-row cap: each
   * truncated export is repeated with `until` = the last returned timestamp, which the service guarantees
   * visits every event exactly once.
   */
  async *exportEvents(filters: EventFilters = {}): AsyncGenerator<AuditEvent> {
    let window = filterValues(filters);
    for (;;) {
      const response = await this.api.request('POST', '/audit/export?format=ndjson', window);
      const truncated = response.headers.get('x-service-truncated') === 'true';
      let last: AuditEvent | undefined;
      for await (const line of ndjsonLines(response)) {
        last = JSON.parse(line) as AuditEvent;
        yield last;
      }
      if (!truncated || !last) return;
      window = { ...window, until: last.timestamp };
    }
  }

  /** Creates a log stream (scope streams:write); an https stream's signing secret is returned this once only. */
  async createStream(creation: StreamCreation): Promise<CreatedLogStream> {
    const body = { ...creation, start_at: creation.start_at instanceof Date ? creation.start_at.toISOString() : creation.start_at };
    return (await this.api.request('POST', '/audit/streams', body)).json() as Promise<CreatedLogStream>;
  }

  async listStreams(): Promise<LogStream[]> {
    return ((await (await this.api.request('GET', '/audit/streams')).json()) as { streams: LogStream[] }).streams;
  }

  /** A stream with its position and lag; pause, resume and the others answer it too. */
  async getStream(id: string): Promise<LogStream> {
    return this.streamCall('GET', id, '');
  }

  async pauseStream(id: string): Promise<LogStream> {
    return this.streamCall('POST', id, '/pause');
  }

  /** Resumes a paused stream where it stopped, or makes a failing one try its destination now. */
  async resumeStream(id: string): Promise<LogStream> {
    return this.streamCall('POST', id, '/resume');
  }

  /** Sends one test record to the stream's destination and reports how it answered. */
  async testStream(id: string): Promise<StreamTestResult> {
    return (await this.api.request('POST', `/audit/streams/${encodeURIComponent(id)}/test`)).json() as Promise<StreamTestResult>;
  }

  async deleteStream(id: string): Promise<void> {
    await this.api.request('DELETE', `/audit/streams/${encodeURIComponent(id)}`);
  }

  private async streamCall(method: string, id: string, action: string): Promise<LogStream> {
    return ((await (await this.api.request(method, `/audit/streams/${encodeURIComponent(id)}${action}`)).json()) as { stream: LogStream })
      .stream;
  }

  /** Registers an endpoint; the secret is returned this once only. */
  async registerWebhook(registration: WebhookRegistration): Promise<WebhookSecret> {
    const body = { event_filter: [], description: '', ...registration };
    return (await this.api.request('POST', '/audit/webhooks', body)).json() as Promise<WebhookSecret>;
  }

  /**
   * Replaces an endpoint's signing secret. The replaced secret keeps signing beside the new one for
   * `overlapS` seconds (server default: one day; 0 retires it at once), so receivers can switch without
   * missing a delivery. Each successful call is a new secret; rotating again within the overlap retires
   * the oldest at once.
   */
  async rotateSecret(id: string, options: { overlapS?: number } = {}): Promise<RotatedWebhookSecret> {
    const body = options.overlapS === undefined ? undefined : { overlap_s: options.overlapS };
    return (
      await this.api.request('POST', `/audit/webhooks/${encodeURIComponent(id)}/rotate-secret`, body)
    ).json() as Promise<RotatedWebhookSecret>;
  }

  /** Sends one signed `webhook.test` delivery now and reports how the receiver answered. */
  async testWebhook(id: string): Promise<WebhookTestResult> {
    return (await this.api.request('POST', `/audit/webhooks/${encodeURIComponent(id)}/test`)).json() as Promise<WebhookTestResult>;
  }

  async listWebhooks(): Promise<WebhookEndpoint[]> {
    const body = (await (await this.api.request('GET', '/audit/webhooks')).json()) as { endpoints: WebhookEndpoint[] };
    return body.endpoints;
  }

  async disableWebhook(id: string): Promise<WebhookEndpoint> {
    return this.endpointCall('POST', id, '/disable');
  }

  /** Changes an endpoint's settings in place; rejects with 422 naming the field for a bad value (a payload filter's place in it). */
  async updateWebhook(id: string, changes: WebhookChanges): Promise<WebhookEndpoint> {
    return this.endpointCall('PATCH', id, '', changes);
  }

  /** Makes a disabled endpoint active again, its failure count at 0. Idempotent. */
  async enableWebhook(id: string): Promise<WebhookEndpoint> {
    return this.endpointCall('POST', id, '/enable');
  }

  /** The endpoint's Ed25519 public keys (`whpk_…`): the current one, and the replaced one during a rotation's overlap. */
  async getWebhookPublicKeys(id: string): Promise<WebhookPublicKey[]> {
    const response = await this.api.request('GET', `${webhookPath(id)}/public-keys`);
    return ((await response.json()) as { public_keys: WebhookPublicKey[] }).public_keys;
  }

  /** One page of the tenant's operational notices, newest first. */
  async listOperationalEvents(options: { limit?: number; cursor?: string } = {}): Promise<OperationalEventPage> {
    const query = toQuery({ limit: options.limit?.toString(), cursor: options.cursor });
    return (await this.api.request('GET', `/audit/webhooks/operational-events${query}`)).json() as Promise<OperationalEventPage>;
  }

  private async endpointCall(method: string, id: string, action: string, body?: unknown): Promise<WebhookEndpoint> {
    return ((await (await this.api.request(method, `${webhookPath(id)}${action}`, body)).json()) as { endpoint: WebhookEndpoint }).endpoint;
  }

  async deleteWebhook(id: string): Promise<void> {
    await this.api.request('DELETE', `/audit/webhooks/${encodeURIComponent(id)}`);
  }

  /** One page of an endpoint's deliveries, newest first. */
  async listDeliveryPage(endpointId: string, filters: DeliveryFilters & { cursor?: string } = {}): Promise<DeliveryPage> {
    const { limit, cursor, ...rest } = filters;
    const query = toQuery({ ...filterValues(rest), limit: limit?.toString(), cursor });
    return (await this.api.request('GET', `${webhookPath(endpointId)}/deliveries${query}`)).json() as Promise<DeliveryPage>;
  }

  /** Every page of an endpoint's delivery log, newest first, following next_cursor to the end. */
  async *listDeliveries(endpointId: string, filters: DeliveryFilters = {}): AsyncGenerator<DeliveryPage> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listDeliveryPage(endpointId, { ...filters, cursor });
      yield page;
      if (!page.page.has_more || !page.page.next_cursor) return;
      cursor = page.page.next_cursor;
    }
  }

  /** One delivery with its attempts. */
  async getDelivery(endpointId: string, deliveryId: string): Promise<{ delivery: WebhookDelivery; attempts: DeliveryAttempt[] }> {
    const response = await this.api.request('GET', `${webhookPath(endpointId)}/deliveries/${encodeURIComponent(deliveryId)}`);
    return response.json() as Promise<{ delivery: WebhookDelivery; attempts: DeliveryAttempt[] }>;
  }

  /**
   * One more attempt of a failed or pending delivery, made within a second. Rejects with 409
   * `already_delivered` for a succeeded delivery and `endpoint_inactive` for a disabled endpoint.
   */
  async retryDelivery(endpointId: string, deliveryId: string): Promise<WebhookDelivery> {
    const response = await this.api.request('POST', `${webhookPath(endpointId)}/deliveries/${encodeURIComponent(deliveryId)}/retry`);
    return ((await response.json()) as { delivery: WebhookDelivery }).delivery;
  }

  /**
   * Delivers again every event of [since, until) (at most 90 days) that matches the endpoint's filter;
   * with only_undelivered (the default) those already delivered successfully are skipped. Runs in the
   * background: follow it with getReplay. Rejects with 409 `replay_running` while one runs.
   */
  async replay(
    endpointId: string,
    range: { since: Date | string; until: Date | string; only_undelivered?: boolean },
  ): Promise<WebhookReplay> {
    const response = await this.api.request('POST', `${webhookPath(endpointId)}/replay`, filterValues(range));
    return ((await response.json()) as { replay: WebhookReplay }).replay;
  }

  async getReplay(endpointId: string, replayId: string): Promise<WebhookReplay> {
    const response = await this.api.request('GET', `${webhookPath(endpointId)}/replays/${encodeURIComponent(replayId)}`);
    return ((await response.json()) as { replay: WebhookReplay }).replay;
  }

  /**
   * Mints a customer portal link for the key's tenant (scope portal:sessions): `ttlS` 60 to 3600 (default
   * 900), `capabilities` a subset of the key's scopes including audit:read (default audit:read only).
   */
  async createPortalSession(options: { ttlS?: number; capabilities?: PortalSession['capabilities'] } = {}): Promise<PortalSessionLink> {
    const body: Record<string, unknown> = {};
    if (options.ttlS !== undefined) body.ttl_s = options.ttlS;
    if (options.capabilities !== undefined) body.capabilities = options.capabilities;
    return (await this.api.request('POST', '/portal/sessions', body)).json() as Promise<PortalSessionLink>;
  }

  /** Ends a portal session at once; its next request is refused. Idempotent. */
  async endPortalSession(id: string): Promise<void> {
    await this.api.request('DELETE', `/portal/sessions/${encodeURIComponent(id)}`);
  }
}

function webhookPath(endpointId: string): string {
  return `/audit/webhooks/${encodeURIComponent(endpointId)}`;
}
