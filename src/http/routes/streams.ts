import Router from '@koa/router';
import { z } from 'zod';
import { standardWebhooksSecretOf } from '../../client/webhookSignature.ts';
import { NotFoundError } from '../../platform/errors.ts';
import { OCSF_VERSIONS } from '../../streams/ocsf.ts';
import type { StreamRegistry, StreamState } from '../../streams/streamRegistry.ts';
import { DESTINATION_TYPES, STREAM_ID_PATTERN, streamCreationSchema, streamFilterSchema } from '../../streams/streamRules.ts';
import type { LogStream } from '../../streams/streamStore.ts';
import type { WebhookUrlPolicy } from '../../webhooks/webhookRules.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { jsonBody, parseQuery } from '../requestInput.ts';
import { actorOf, principalOf, type AppContext, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

/** The stream object (docs/streams.md); the destination never carries its secret. */
const logStreamSchema = z
  .looseObject({
    id: z.string().meta({ example: 'str_6f1c0e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    status: z.enum(['active', 'paused', 'failing']).meta({
      description: 'failing: the destination refused a batch in a way retrying does not heal (401, 403, 404...); see last_error.',
    }),
    destination: z
      .looseObject({ type: z.enum(DESTINATION_TYPES) })
      .meta({ description: 'The destination as created, without its secret (token, api_key, secret_access_key, password).' }),
    format: z.enum(['native', 'ocsf']),
    ocsf_version: z.enum(OCSF_VERSIONS).nullable().meta({ description: 'The OCSF release of an ocsf stream’s records; null for native.' }),
    filter: streamFilterSchema,
    tree_heads: z.boolean(),
    start_at: z.string().meta({ format: 'date-time' }),
    position: z.int().nullable().meta({
      description: "The next leaf of the tenant's trail to deliver: every event before it was delivered. null before the first round.",
    }),
    lag_events: z
      .int()
      .meta({ description: 'Sealed events after the position, not yet delivered (those the filter leaves out included).' }),
    lag_seconds: z.int().meta({ description: 'How long the oldest of them has waited since it was written; 0 when caught up.' }),
    last_delivered_at: z.string().nullable().meta({ format: 'date-time' }),
    last_error: z.string().nullable().meta({ description: 'What the destination last answered when it did not accept a batch.' }),
    last_error_at: z.string().nullable().meta({ format: 'date-time' }),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'LogStream' });

const streamEnvelopeSchema = z.looseObject({ stream: logStreamSchema }).meta({ id: 'LogStreamEnvelope' });
const streamCreatedSchema = z
  .looseObject({
    stream: logStreamSchema,
    secret: z.string().optional().meta({ description: 'https streams only: the signing secret of the batches (64 hex), shown once.' }),
    standard_webhooks_secret: z.string().optional().meta({
      description:
        'https streams only: the same secret in the Standard Webhooks form (whsec_ and base64), for the standardwebhooks and svix libraries; shown once.',
      example: 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZg==',
    }),
  })
  .meta({ id: 'LogStreamCreated' });
const streamListSchema = z.looseObject({ streams: z.array(logStreamSchema) }).meta({ id: 'LogStreamList' });
const streamTestSchema = z
  .looseObject({
    success: z.boolean(),
    duration_ms: z.int(),
    error: z.string().nullable().meta({ description: 'What the destination answered, when it did not accept the record.' }),
  })
  .meta({ id: 'LogStreamTestResult' });

function toApi(state: StreamState) {
  const stream: LogStream = state.stream;
  return {
    id: stream.id,
    status: state.status,
    destination: { type: stream.destinationType, ...stream.destination },
    format: stream.format,
    ocsf_version: stream.ocsfVersion,
    filter: stream.filter,
    tree_heads: stream.treeHeads,
    start_at: stream.startAt.toISOString(),
    position: stream.ownerTenantId === null ? null : (state.positions.get(stream.ownerTenantId) ?? null),
    lag_events: state.lagEvents,
    lag_seconds: state.lagSeconds,
    last_delivered_at: stream.lastDeliveredAt?.toISOString() ?? null,
    last_error: stream.lastError,
    last_error_at: stream.lastErrorAt?.toISOString() ?? null,
    created_at: stream.createdAt.toISOString(),
  };
}

/** A malformed id names no stream: 404, like an unknown one. */
function streamId(ctx: AppContext): string {
  const id = ctx.params.id!;
  if (!STREAM_ID_PATTERN.test(id)) throw new NotFoundError('No such log stream.');
  return id;
}

export function streamRoutes(registry: StreamRegistry): Router<RequestState> {
  const router = new Router<RequestState>();
  const tenantOf = (ctx: AppContext) => principalOf(ctx).tenantId;

  router.post('/audit/streams', requireScope('streams:write'), jsonBody('64kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const { stream, secret } = await registry.create(tenantOf(ctx), ctx.request.body ?? {}, actorOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `${ctx.path.replace(/\/$/, '')}/${stream.id}`);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      stream: toApi(await registry.stateOf(stream)),
      ...(secret === undefined ? {} : { secret, standard_webhooks_secret: standardWebhooksSecretOf(secret) }),
    };
  });

  router.get('/audit/streams', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const streams = await registry.list(tenantOf(ctx));
    ctx.body = { streams: await Promise.all(streams.map(async (stream) => toApi(await registry.stateOf(stream)))) };
  });

  router.get('/audit/streams/:id', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = { stream: toApi(await registry.state(tenantOf(ctx), streamId(ctx))) };
  });

  router.post('/audit/streams/:id/pause', requireScope('streams:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = { stream: toApi(await registry.stateOf(await registry.pause(tenantOf(ctx), streamId(ctx), actorOf(ctx)))) };
  });

  router.post('/audit/streams/:id/resume', requireScope('streams:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = { stream: toApi(await registry.stateOf(await registry.resume(tenantOf(ctx), streamId(ctx), actorOf(ctx)))) };
  });

  router.post('/audit/streams/:id/test', requireScope('streams:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const result = await registry.test(tenantOf(ctx), streamId(ctx));
    ctx.body = { success: result.success, duration_ms: result.durationMs, error: result.error };
  });

  router.delete('/audit/streams/:id', requireScope('streams:write'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    await registry.delete(tenantOf(ctx), streamId(ctx), actorOf(ctx));
    ctx.status = 204;
  });

  return router;
}

export function streamsOpenApi(policy: WebhookUrlPolicy): OpenApiContribution {
  const creation = streamCreationSchema(policy).meta({ id: 'LogStreamCreation' });
  const idParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: STREAM_ID_PATTERN.source } };
  const unknown = { '404': authenticatedResponse({ description: 'Unknown stream, or another tenant’s.', content: json(ref('Error')) }) };
  const change = (operationId: string, summary: string, description: string) => ({
    post: {
      operationId,
      summary,
      security: [{ apiKey: [] }],
      parameters: [idParameter],
      responses: {
        '200': authenticatedResponse({ description, content: json(ref('LogStreamEnvelope')) }),
        ...standardErrorResponses('streams:write'),
        ...unknown,
      },
    },
  });
  return {
    schemas: [creation, streamFilterSchema, logStreamSchema, streamEnvelopeSchema, streamCreatedSchema, streamListSchema, streamTestSchema],
    paths: {
      '/audit/streams': {
        post: {
          operationId: 'createStream',
          summary:
            "Create a log stream: the tenant's trail, or a filtered part of it, delivered in order and in batches to Splunk HEC, Datadog, an HTTPS collector or S3, from now or from a past instant (docs/streams.md).",
          security: [{ apiKey: [] }],
          requestBody: { required: true, content: json(ref('LogStreamCreation')) },
          responses: {
            '201': authenticatedResponse({
              description: 'Created; its first batch follows within seconds.',
              headers: { Location: { schema: { type: 'string' }, description: 'The new stream.' } },
              content: json(ref('LogStreamCreated')),
            }),
            ...standardErrorResponses('streams:write'),
          },
        },
        get: {
          operationId: 'listStreams',
          summary: "The tenant's log streams, with their position and lag.",
          security: [{ apiKey: [] }],
          responses: {
            '200': authenticatedResponse({ description: 'The streams.', content: json(ref('LogStreamList')) }),
            ...standardErrorResponses('audit:read'),
          },
        },
      },
      '/audit/streams/{id}': {
        get: {
          operationId: 'getStream',
          summary: 'One log stream, with its position and lag.',
          security: [{ apiKey: [] }],
          parameters: [idParameter],
          responses: {
            '200': authenticatedResponse({ description: 'The stream.', content: json(ref('LogStreamEnvelope')) }),
            ...standardErrorResponses('audit:read'),
            ...unknown,
          },
        },
        delete: {
          operationId: 'deleteStream',
          summary: 'Delete a log stream and its position. What it delivered stays where it went.',
          security: [{ apiKey: [] }],
          parameters: [idParameter],
          responses: { '204': authenticatedResponse({ description: 'Deleted.' }), ...standardErrorResponses('streams:write'), ...unknown },
        },
      },
      '/audit/streams/{id}/pause': change(
        'pauseStream',
        'Pause a stream; its position is kept for as long as it stays paused. Idempotent.',
        'The stream, paused.',
      ),
      '/audit/streams/{id}/resume': change(
        'resumeStream',
        'Resume a paused stream from where it stopped, or make a failing one try its destination now. Idempotent.',
        'The stream, active.',
      ),
      '/audit/streams/{id}/test': {
        post: {
          operationId: 'testStream',
          summary: 'Send one test record to the destination now and report the outcome; nothing of the trail, nothing stored.',
          security: [{ apiKey: [] }],
          parameters: [idParameter],
          responses: {
            '200': authenticatedResponse({
              description: 'The outcome (a refused record is still a 200).',
              content: json(ref('LogStreamTestResult')),
            }),
            ...standardErrorResponses('streams:write'),
            ...unknown,
          },
        },
      },
    },
  };
}
