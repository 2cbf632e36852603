import { Readable } from 'node:stream';
import Router from '@koa/router';
import { z } from 'zod';
import type { Queryable } from '../../db/database.ts';
import { UUID_PATTERN } from '../../events/eventFields.ts';
import { toEventFilters } from '../../events/eventFilters.ts';
import { NotYetSealedError } from '../../integrity/integrityReader.ts';
import type { LiveFeed } from '../../live/liveFeed.ts';
import { leafOfEvent, sealedSize } from '../../live/liveStore.ts';
import { liveStreamText } from '../../live/liveStream.ts';
import { ServiceUnavailableError, ValidationError } from '../../platform/errors.ts';
import { requireScope } from '../authenticate.ts';
import { holdLongReadSlot, longReadRoute, type LongReadAdmission } from '../longRead.ts';
import { parseQuery } from '../requestInput.ts';
import { filterQuerySchema } from './events.ts';
import { principalOf, type AppContext, type RequestState } from '../state.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';

export interface LiveRouteOptions {
  readonly db: Queryable;
  readonly feed: LiveFeed;
  /** Admission of live streams: per tenant and per instance, 429 concurrent_live_streams past either. */
  readonly admission: LongReadAdmission;
  readonly heartbeatMs: number;
  /** Aborted when the process begins to stop: open streams end and new ones are refused (503). */
  readonly stopping: AbortSignal;
  /** SEAL_INTERVAL, for the Retry-After of a Last-Event-ID not yet sealed. */
  readonly sealIntervalMs: number;
}

/**
 * GET /audit/events/live: Server-Sent Events of the tenant's trail as it is sealed (docs/api.md "Live
 * events"). Mounted before the events routes, whose /audit/events/:event_id would take "live" for an id.
 */
export function liveRoutes(options: LiveRouteOptions): Router<RequestState> {
  const router = new Router<RequestState>();

  router.get('/audit/events/live', longReadRoute, requireScope('audit:read'), withRetryAfter, async (ctx) => {
    const filters = toEventFilters(parseQuery(filterQuerySchema, ctx.query));
    const lastEventId = lastEventIdOf(ctx);
    if (options.stopping.aborted) throw new ServiceUnavailableError('This instance is shutting down; reconnect.');
    const tenantId = principalOf(ctx).tenantId;
    const fromLeaf = await startingLeaf(options, tenantId, lastEventId);
    const ended = new AbortController();
    holdLongReadSlot(ctx, options.admission, 'live streams', () => ended.abort());
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    ctx.set('Cache-Control', 'no-store');
    // Proxies that buffer responses (nginx) would hold the events back.
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = Readable.from(
      liveStreamText({
        db: options.db,
        feed: options.feed,
        tenantId,
        filters,
        fromLeaf,
        heartbeatMs: options.heartbeatMs,
        signal: AbortSignal.any([ended.signal, options.stopping]),
        reauthenticate: ctx.state.reauthenticate ?? (() => Promise.resolve()),
      }),
      { objectMode: false },
    );
  });

  return router;
}

/** The header as EventSource sends it on a reconnection: the id of the last event received, or absent. */
function lastEventIdOf(ctx: AppContext): string | undefined {
  const value = ctx.get('Last-Event-ID').trim();
  if (value === '') return undefined;
  if (!UUID_PATTERN.test(value)) throw ValidationError.single('Last-Event-ID', 'must be the id of an event this stream sent (a UUID)');
  return value.toLowerCase();
}

/**
 * Just after the event a reconnecting client saw last; for a new stream, the end of the tenant's sealed
 * trail, so it carries what is sealed from now on (events written up to one SEAL_INTERVAL earlier included).
 */
async function startingLeaf(options: LiveRouteOptions, tenantId: string, lastEventId: string | undefined): Promise<number> {
  if (lastEventId === undefined) return sealedSize(options.db, tenantId);
  const found = await leafOfEvent(options.db, tenantId, lastEventId);
  if (found.kind === 'unknown') throw ValidationError.single('Last-Event-ID', 'names no event of this tenant');
  if (found.kind === 'unsealed') throw new NotYetSealedError(Math.max(1, Math.ceil(options.sealIntervalMs / 1000)));
  return found.leaf + 1;
}

/** The Retry-After of a 409 not_yet_sealed, as the proof endpoint sends it. */
async function withRetryAfter(ctx: AppContext, next: () => Promise<unknown>): Promise<void> {
  try {
    await next();
  } catch (error) {
    if (error instanceof NotYetSealedError) ctx.set('Retry-After', String(error.retryAfterSeconds));
    throw error;
  }
}

const liveEventsSchema = z.string().meta({
  id: 'LiveEvents',
  description:
    'Server-Sent Events. Each event: `id:` the event_id, `data:` one AuditEvent as JSON. A `: heartbeat` comment is sent when ' +
    'nothing else was for LIVE_HEARTBEAT (15 s by default).',
});

const concurrentLiveStreamsSchema = z
  .looseObject({
    error: z.literal('concurrent_live_streams'),
    message: z.string(),
    limit: z.int().meta({ description: 'Live streams one tenant may hold open at once on one instance.' }),
    retry_after_s: z.int(),
  })
  .meta({ id: 'ConcurrentLiveStreams' });

export const liveOpenApi: OpenApiContribution = {
  schemas: [liveEventsSchema, concurrentLiveStreamsSchema],
  paths: {
    '/audit/events/live': {
      get: {
        operationId: 'liveEvents',
        summary: "Follow the tenant's trail: its events as they are sealed, oldest first, as Server-Sent Events.",
        description:
          'Events arrive in the order they were sealed into the tenant tree (within SEAL_INTERVAL of their commit), which is the ' +
          'order they became visible, not their timestamps. A stream without Last-Event-ID starts at the end of the sealed trail. ' +
          'Reconnect with Last-Event-ID set to the last id received: the stream resumes just after that event, without loss or ' +
          'repetition. The stream ends when the instance shuts down or the key is revoked; reconnect.',
        security: [{ apiKey: [] }],
        parameters: [
          ...queryParameters(filterQuerySchema),
          {
            name: 'Last-Event-ID',
            in: 'header',
            required: false,
            description: 'The id of the last event received: the stream resumes just after it.',
            schema: { type: 'string', format: 'uuid' },
          },
        ],
        responses: {
          '200': authenticatedResponse({ description: 'The stream.', content: { 'text/event-stream': { schema: ref('LiveEvents') } } }),
          '409': authenticatedResponse(
            {
              description: 'not_yet_sealed: the Last-Event-ID event is stored but not yet sealed; retry after Retry-After seconds.',
              content: json(ref('Error')),
            },
            'Retry-After',
          ),
          ...standardErrorResponses('audit:read'),
          '422': authenticatedResponse({
            description: 'Invalid filters, or a Last-Event-ID that is not the id of an event of this tenant.',
            content: json(ref('Error')),
          }),
          '429': authenticatedResponse(
            {
              description:
                'rate_limit_exceeded: the key spent its read budget. concurrent_live_streams: the tenant already holds as many live ' +
                'streams open as it may (`limit`), or the instance as many as it can; retry after Retry-After seconds.',
              content: json({ oneOf: [ref('RateLimited'), ref('ConcurrentLiveStreams')] }),
            },
            'Retry-After',
          ),
          '503': {
            description: 'A dependency is unavailable, or the instance is shutting down; retry later.',
            content: json(ref('Error')),
          },
        },
      },
    },
  },
};
