import { Readable } from 'node:stream';
import Router from '@koa/router';
import { z } from 'zod';
import { EXPORT_ROW_CAP, type EventExporter, type ExportSession } from '../../events/eventExport.ts';
import { filterFieldsSchema, toEventFilters, type EventFilters } from '../../events/eventFilters.ts';
import { adminEvent } from '../../events/adminEvent.ts';
import type { EventWriter } from '../../events/eventWriter.ts';
import type { ExpiredLeavesWindow } from '../../integrity/expiredEvents.ts';
import { EXPIRED_RECORD_CAP, type ExportProofs } from '../../integrity/exportProofs.ts';
import type { IntegrityReader } from '../../integrity/integrityReader.ts';
import type { LongReadPace } from '../../platform/longReadDutyCycle.ts';
import type { LongReadTurns } from '../../platform/longReadYield.ts';
import { requireScope } from '../authenticate.ts';
import { ExportChunks } from '../exportChunks.ts';
import { holdLongReadSlot, longReadRoute, type YieldingLongReads } from '../longRead.ts';
import { jsonBody, parseBody, parseQuery, queryBoolean, queryInteger } from '../requestInput.ts';
import { ValidationError } from '../../platform/errors.ts';
import { actorOf, principalOf, type AppContext, type RequestState } from '../state.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { auditEventSchema } from '../apiSchemas.ts';

/** The export body: the list filters, in JSON (phi_involved is a JSON boolean here). */
const exportBodySchema = z.strictObject(filterFieldsSchema).partial().meta({ id: 'ExportRequest' });

const exportQuerySchema = z.strictObject({
  format: z
    .enum(['json', 'ndjson'], { message: 'must be json or ndjson' })
    .optional()
    .meta({ description: 'json (default): one object; ndjson: one event per line.' }),
  proofs: queryBoolean().optional().meta({
    description: 'true: each event carries its inclusion proof against the signed tree head included in the response (docs/integrity.md).',
  }),
  tree_size: queryInteger(1, Number.MAX_SAFE_INTEGER)
    .optional()
    .meta({
      description:
        'With proofs=true: prove against the signed tree head of this size instead of the latest, e.g. the head of the first page ' +
        'of an export continued with until, so that every page carries one head. Events outside that head get proof null.',
    }),
});

type ExportFormat = 'json' | 'ndjson';

/** limit and cursor belong to the list endpoint; say so rather than just "unknown field". */
function refusePaging(body: unknown): void {
  if (typeof body !== 'object' || body === null) return;
  const given = ['limit', 'cursor'].filter((field) => field in body);
  if (given.length === 0) return;
  throw new ValidationError(
    given.map((field) => ({
      field,
      message: `is not accepted by export, which returns up to ${EXPORT_ROW_CAP} events; continue a truncated export with until`,
    })),
    `${given.join(' and ')} do not apply to export`,
  );
}

export interface ExportRouteOptions {
  /** Reads on the long-read pool (LongReads.db). */
  readonly exporter: EventExporter;
  /**
   * Exports without proofs, when a read replica is configured (db/replicaReads.ts): they need no signed head
   * read in their snapshot. With proofs, the head and the events must be of one state of the primary.
   */
  readonly replicaExporter?: EventExporter;
  readonly writer: EventWriter;
  /** Reads the proofs on the long-read pool too. */
  readonly integrity: IntegrityReader;
  /** Admits exports, and gives each the turns in which it yields to short requests. */
  readonly longReads: YieldingLongReads;
}

export function exportRoutes({ exporter, replicaExporter, writer, integrity, longReads }: ExportRouteOptions): Router<RequestState> {
  const router = new Router<RequestState>();

  router.post('/audit/export', longReadRoute, requireScope('audit:export'), jsonBody('64kb'), async (ctx) => {
    const { format = 'json', proofs, tree_size: treeSize } = parseQuery(exportQuerySchema, ctx.query);
    if (treeSize !== undefined && proofs !== true) throw ValidationError.single('tree_size', 'applies only with proofs=true');
    refusePaging(ctx.request.body);
    // No body at all means no filters; a body of `null` is a client's mistake, not "export everything".
    const given: unknown = ctx.request.body;
    const body = parseBody(exportBodySchema, given === undefined || given === '' ? {} : given);
    const filters = toEventFilters(body);
    holdLongReadSlot(ctx, longReads, 'exports');
    const source = proofs === true ? exporter : (replicaExporter ?? exporter);
    const session = await source.open(principalOf(ctx).tenantId, filters, { shareSnapshot: proofs === true });
    const proven = proofs
      ? await integrity
          .openExportProofs(principalOf(ctx).tenantId, session, { treeSize, untilMs: filters.untilMs })
          .catch(async (error: unknown) => {
            await session.close();
            throw error;
          })
      : undefined;
    ctx.status = 200;
    // Known before the first byte: the window was sized in the export's snapshot (its expired leaves too).
    ctx.set('X-Service-Truncated', String(session.truncated));
    ctx.set('Cache-Control', 'no-store');
    ctx.type = format === 'ndjson' ? 'application/x-ndjson' : 'application/json';
    ctx.body = Readable.from(
      renderExport(
        session,
        format,
        longReads.turns(),
        (count, completed) => recordExport(ctx, writer, filters, format, session.truncated, count, completed),
        proven && { proofs: proven.proofs, window: proven.expiredWindow },
      ),
      {
        objectMode: false,
      },
    );
  });

  return router;
}

/**
 * Streams the rows. The export is recorded in the caller's trail before the closing bytes are sent, so
 * no client holds a complete export that the trail does not show; if recording fails the response is
 * cut short instead. An export abandoned midway is recorded as incomplete.
 */
async function* renderExport(
  session: ExportSession,
  format: ExportFormat,
  turns: LongReadTurns & LongReadPace,
  record: (count: number, completed: boolean) => Promise<void>,
  withProofs?: { proofs: ExportProofs; window: ExpiredLeavesWindow },
): AsyncGenerator<Buffer> {
  const proven = withProofs?.proofs;
  let count = 0;
  let recorded = false;
  const chunks = new ExportChunks();
  if (format === 'json') chunks.append('{"events":[');
  let expired = 0;
  try {
    // After each round trip of rows the export keeps to its duty cycle (platform/longReadDutyCycle.ts).
    const rows = session.rows(turns.roundTrip);
    for await (const json of proven ? proven.decorate(rows, format) : rows) {
      const full = format === 'json' ? chunks.append(count === 0 ? '' : ',', json) : chunks.append(json, '\n');
      count += 1;
      if (full !== undefined) yield full;
      // Before the next row, short requests in flight go first (platform/longReadYield.ts): nothing more is
      // fetched, rendered or written meanwhile. Awaited only when there is something to wait for: an await
      // per row would cost every export 10,000 turns of the microtask queue.
      const wait = turns.turn();
      if (wait !== undefined) await wait;
    }
    // The leaves of expired events in the window: in JSON an `expired` member after the events, in NDJSON
    // lines after theirs. Absent when nothing expired, so a trail without expiry exports as before.
    for await (const record of withProofs ? withProofs.proofs.expiredRecords(withProofs.window, format) : []) {
      const full = format === 'json' ? chunks.append(expired === 0 ? '],"expired":[' : ',', record) : chunks.append(record, '\n');
      expired += 1;
      if (full !== undefined) yield full;
      const wait = turns.turn();
      if (wait !== undefined) await wait;
    }
    await session.close();
    recorded = true;
    await record(count, true);
    const head = proven ? `,"tree_head":${JSON.stringify(proven.head ?? null)}` : '';
    const full = format === 'json' ? chunks.append(`],"count":${count},"truncated":${session.truncated}${head}}`) : undefined;
    if (full !== undefined) yield full;
    yield chunks.rest();
  } finally {
    await proven?.close();
    await session.close();
    if (!recorded) await record(count, false).catch(() => undefined);
  }
}

async function recordExport(
  ctx: AppContext,
  writer: EventWriter,
  filters: EventFilters,
  format: ExportFormat,
  truncated: boolean,
  count: number,
  completed: boolean,
): Promise<void> {
  const event = adminEvent({
    tenantId: principalOf(ctx).tenantId,
    action: 'audit.export',
    actor: actorOf(ctx),
    resourceType: 'audit_export',
    resourceId: ctx.state.requestId,
    success: completed,
    details: {
      filters: {
        action: filters.action,
        resource_type: filters.resourceType,
        phi_involved: filters.phiInvolved,
        since: filters.sinceMs === undefined ? undefined : new Date(filters.sinceMs).toISOString(),
        until: filters.untilMs === undefined ? undefined : new Date(filters.untilMs).toISOString(),
        user_id: filters.userId,
        resource_id: filters.resourceId,
        action_prefix: filters.actionPrefix,
      },
      format,
      count,
      truncated,
      completed,
    },
  });
  try {
    await writer.write([event], 'internal');
  } catch (error) {
    ctx.state.log.error({ err: error }, 'could not record audit.export');
    throw error;
  }
}

const expiredLeafSchema = z
  .looseObject({
    expired: z.strictObject({
      event_id: z.string(),
      timestamp: z.string().meta({ description: "The event's timestamp, as the expiry recorded it." }),
      leaf_index: z.int(),
      leaf_hash: z.string().meta({ description: 'The leaf hash the event was sealed with (hex), which the proof proves.' }),
      expired_at: z.string(),
      retain: z.string().meta({ description: 'The period in force when it expired, e.g. 1d.' }),
      source: z.string().meta({ description: 'Where the period came from: policy or default.' }),
    }),
    proof: z.looseObject({}).meta({ description: "The leaf's inclusion proof against the export's tree head." }),
  })
  .meta({
    id: 'ExpiredLeaf',
    description:
      'With proofs=true: a leaf below the tree head whose event expired (its retention period over), in the time window the ' +
      'export covers. Its content is gone; the leaf and its position are proven, so verifiers report it as expired, not missing.',
  });

const exportResultSchema = z
  .looseObject({
    events: z.array(auditEventSchema),
    expired: z
      .array(expiredLeafSchema)
      .optional()
      .meta({ description: 'With proofs=true, only when events in the window expired: the leaves of those events, newest first.' }),
    count: z.int(),
    truncated: z.boolean(),
  })
  .meta({ id: 'ExportResult' });

const exportLinesSchema = z.string().meta({
  id: 'ExportLines',
  description:
    'format=ndjson: one AuditEvent JSON object per line, each line ending in \\n; with proofs=true, followed by one ExpiredLeaf line ' +
    'per expired leaf in the window (with tree_head), when there are any.',
});

const concurrentExportsSchema = z
  .looseObject({
    error: z.literal('concurrent_exports'),
    message: z.string(),
    limit: z.int().meta({ description: 'Exports one tenant may run at once on one instance.' }),
    retry_after_s: z.int(),
  })
  .meta({ id: 'ConcurrentExports' });

export const exportOpenApi: OpenApiContribution = {
  schemas: [exportBodySchema, expiredLeafSchema, exportResultSchema, exportLinesSchema, concurrentExportsSchema],
  paths: {
    '/audit/export': {
      post: {
        operationId: 'exportEvents',
        summary: `Export up to ${EXPORT_ROW_CAP} events matching the filters, newest first, as JSON or NDJSON.`,
        description:
          'When X-Service-Truncated is true, repeat with until set to the timestamp of the last returned event: ' +
          'the export ends on a millisecond boundary, so this walk visits every event exactly once. With proofs=true, the ' +
          `records of expired leaves (at most ${EXPIRED_RECORD_CAP}) count too: continue from the oldest timestamp, the last ` +
          "event's or the last record's expired.timestamp.",
        security: [{ apiKey: [] }],
        parameters: queryParameters(exportQuerySchema),
        requestBody: { required: true, content: json(ref('ExportRequest')) },
        responses: {
          '200': authenticatedResponse(
            {
              description: 'The events: an ExportResult object with format=json (the default), ExportLines with format=ndjson.',
              content: { ...json(ref('ExportResult')), 'application/x-ndjson': { schema: ref('ExportLines') } },
            },
            'X-Service-Truncated',
          ),
          '400': authenticatedResponse({ description: 'The body is not valid JSON.', content: json(ref('Error')) }),
          '413': authenticatedResponse({ description: 'The body exceeds 64 KiB.', content: json(ref('Error')) }),
          '415': authenticatedResponse({ description: 'The body is not application/json.', content: json(ref('Error')) }),
          ...standardErrorResponses('audit:export'),
          '429': authenticatedResponse(
            {
              description:
                'rate_limit_exceeded: the key spent its write budget. concurrent_exports: the tenant already runs as many exports as it ' +
                'may at once (`limit`), or the instance as many as it can; retry after Retry-After seconds.',
              content: json({ oneOf: [ref('RateLimited'), ref('ConcurrentExports')] }),
            },
            'Retry-After',
          ),
        },
      },
    },
  },
};
