import Router from '@koa/router';
import { z } from 'zod';
import { parseEventBatch, type EventTimeWindow } from '../../ingestion/eventInput.ts';
import type { EventWriter } from '../../events/eventWriter.ts';
import { isRefusedData, sqlState } from '../../db/sqlstate.ts';
import { ValidationError } from '../../platform/errors.ts';
import { requireBearerToken } from '../bearerTokens.ts';
import { jsonBody, parseBody } from '../requestInput.ts';
import type { RequestState } from '../state.ts';

const ingestBodySchema = z.strictObject({
  events: z.array(z.unknown()).min(1, 'must hold at least one event'),
});

/** 1,000 events of up to 16 KiB of details each, with room for the other fields. */
const INGEST_BODY_LIMIT = '24mb';

/**
 * POST /internal/v1/events on the internal port: producers' batch input. A batch is all-or-nothing, with
 * one error per invalid field of each invalid item.
 */
export function ingestRoutes(writer: EventWriter, ingestTokens: readonly string[], window: EventTimeWindow): Router<RequestState> {
  const router = new Router<RequestState>();

  router.post('/internal/v1/events', requireBearerToken(ingestTokens, 'ingest token'), jsonBody(INGEST_BODY_LIMIT), async (ctx) => {
    const body = parseBody(ingestBodySchema, ctx.request.body);
    const events = parseEventBatch(body.events, window);
    const results = await writer.write(events, 'http').catch((error: unknown) => {
      // Validation lets through nothing Postgres is known to refuse; should it refuse something new, the
      // producer learns that retrying the batch is pointless, and nothing of it was stored.
      if (!isRefusedData(error)) throw error;
      throw ValidationError.single(
        'events',
        `the event store refused an event of this batch (SQLSTATE ${sqlState(error)}); none were stored`,
      );
    });
    const stored = results.filter((result) => result.status === 'stored').length;
    ctx.body = { stored, duplicates: results.length - stored, events: results };
  });

  return router;
}
