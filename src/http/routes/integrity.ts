import Router from '@koa/router';
import { z } from 'zod';
import { filterFieldsSchema } from '../../events/eventFilters.ts';
import { parseTimestampCeilMs } from '../../events/eventFields.ts';
import { NotYetSealedError, type IntegrityReader } from '../../integrity/integrityReader.ts';
import { checkTimeWindow } from '../../platform/paging.ts';
import { requireScope } from '../authenticate.ts';
import { pageSchema } from '../apiSchemas.ts';
import { authenticatedResponse, json, queryParameters, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { parseQuery, queryInteger } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';
import { DEFAULT_PAGE_SIZE, listEventsQuerySchema, noQuerySchema } from './events.ts';

const treeSize = (description: string) => queryInteger(1, Number.MAX_SAFE_INTEGER).meta({ description });

const proofQuerySchema = z.strictObject({
  tree_size: treeSize('The size of the signed tree head to prove against; the latest head by default.').optional(),
});

const consistencyQuerySchema = z.strictObject({
  first: treeSize('The size of the earlier signed tree head.'),
  second: treeSize('The size of the later signed tree head.'),
});

const treeHeadsQuerySchema = z.strictObject({
  since: filterFieldsSchema.since.optional().meta({ description: 'Heads signed at or after this time (RFC 3339).' }),
  until: filterFieldsSchema.until.optional().meta({ description: 'Heads signed before this time (RFC 3339).' }),
  limit: listEventsQuerySchema.shape.limit,
  cursor: listEventsQuerySchema.shape.cursor,
});

/** The integrity endpoints (docs/integrity.md): heads, proofs, keys. `sealIntervalMs` sizes Retry-After. */
export function integrityRoutes(integrity: IntegrityReader, sealIntervalMs: number): Router<RequestState> {
  const router = new Router<RequestState>();
  const retryAfterSeconds = Math.max(1, Math.ceil(sealIntervalMs / 1000));

  router.get('/audit/integrity/tree-head', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = await integrity.latestHead(principalOf(ctx).tenantId);
  });

  router.get('/audit/integrity/tree-heads', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(treeHeadsQuerySchema, ctx.query);
    const sinceMs = query.since === undefined ? undefined : parseTimestampCeilMs(query.since);
    const untilMs = query.until === undefined ? undefined : parseTimestampCeilMs(query.until);
    checkTimeWindow(sinceMs, untilMs);
    ctx.body = await integrity.headsPage({
      tenantId: principalOf(ctx).tenantId,
      sinceMs,
      untilMs,
      limit: query.limit ?? DEFAULT_PAGE_SIZE,
      cursor: query.cursor,
    });
  });

  router.get('/audit/events/:event_id/proof', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(proofQuerySchema, ctx.query);
    try {
      ctx.body = await integrity.inclusionProof(principalOf(ctx).tenantId, ctx.params.event_id!, query.tree_size, retryAfterSeconds);
    } catch (error) {
      if (error instanceof NotYetSealedError) ctx.set('Retry-After', String(error.retryAfterSeconds));
      throw error;
    }
  });

  router.get('/audit/integrity/consistency', requireScope('audit:read'), async (ctx) => {
    const query = parseQuery(consistencyQuerySchema, ctx.query);
    ctx.body = await integrity.consistencyProof(principalOf(ctx).tenantId, query.first, query.second);
  });

  router.get('/audit/integrity/keys', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = await integrity.keys();
  });

  return router;
}

const hexHash = z
  .string()
  .regex(/^[0-9a-f]{64}$/)
  .meta({ description: 'SHA-256, lowercase hex.' });

const signedTreeHeadSchema = z
  .looseObject({
    tenant_id: z.string(),
    tree_size: z.int(),
    root_hash: hexHash,
    timestamp: z.string().meta({ format: 'date-time', description: 'UTC, millisecond precision.' }),
    key_id: z.string(),
    signature: z.string().meta({ description: 'Base64 Ed25519 signature over the RFC 8785 canonical JSON of the five fields above.' }),
  })
  .meta({ id: 'SignedTreeHead' });

const treeHeadListSchema = z.looseObject({ tree_heads: z.array(signedTreeHeadSchema), page: pageSchema }).meta({ id: 'TreeHeadList' });

const inclusionProofSchema = z
  .looseObject({ leaf_index: z.int(), tree_size: z.int(), leaf_hash: hexHash, audit_path: z.array(hexHash) })
  .meta({ id: 'InclusionProof', description: 'RFC 9162 inclusion proof of the event against the signed tree head of tree_size.' });

const consistencyProofSchema = z
  .looseObject({ first: z.int(), second: z.int(), proof: z.array(hexHash) })
  .meta({ id: 'ConsistencyProof', description: 'RFC 9162 consistency proof between the signed tree heads of sizes first and second.' });

const sealKeyListSchema = z
  .looseObject({
    keys: z.array(
      z.looseObject({
        key_id: z.string(),
        algorithm: z.literal('Ed25519'),
        public_key_pem: z.string().meta({ description: 'SubjectPublicKeyInfo, PEM.' }),
        valid_from: z.string().meta({ format: 'date-time' }),
        valid_until: z.string().nullable().meta({ format: 'date-time', description: 'null for the current key.' }),
      }),
    ),
  })
  .meta({ id: 'SealKeyList' });

const get = (
  operationId: string,
  summary: string,
  parameters: object[],
  ok: { description: string; content: object },
  extra: Record<string, unknown> = {},
) => ({
  get: {
    operationId,
    summary,
    security: [{ apiKey: [] }],
    parameters,
    responses: { '200': authenticatedResponse(ok), ...extra, ...standardErrorResponses('audit:read') },
  },
});

const notFound = (description: string) => ({ '404': authenticatedResponse({ description, content: json(ref('Error')) }) });

export const integrityOpenApi: OpenApiContribution = {
  schemas: [signedTreeHeadSchema, treeHeadListSchema, inclusionProofSchema, consistencyProofSchema, sealKeyListSchema],
  paths: {
    '/audit/integrity/tree-head': get(
      'getTreeHead',
      "The latest signed head of the tenant's Merkle tree.",
      [],
      {
        description: 'The signed tree head.',
        content: json(ref('SignedTreeHead')),
      },
      notFound('Nothing of this tenant has been sealed yet.'),
    ),
    '/audit/integrity/tree-heads': get('listTreeHeads', 'Signed tree heads, newest first.', queryParameters(treeHeadsQuerySchema), {
      description: 'One page of signed tree heads.',
      content: json(ref('TreeHeadList')),
    }),
    '/audit/events/{event_id}/proof': get(
      'getEventProof',
      "The event's inclusion proof against a signed tree head.",
      [{ name: 'event_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } }, ...queryParameters(proofQuerySchema)],
      { description: 'The inclusion proof.', content: json(ref('InclusionProof')) },
      {
        ...notFound("Unknown event (or another tenant's), or no signed tree head of tree_size."),
        '410': authenticatedResponse({
          description:
            'expired: the event was removed at the end of its retention period (expired_at, retain, source); its leaf stays in the tree.',
          content: json(ref('Error')),
        }),
        '409': authenticatedResponse(
          {
            description: 'not_yet_sealed: the event is stored but has no leaf yet; retry after Retry-After seconds.',
            content: json(ref('Error')),
          },
          'Retry-After',
        ),
      },
    ),
    '/audit/integrity/consistency': get(
      'getConsistencyProof',
      'A consistency proof between two signed tree heads.',
      queryParameters(consistencyQuerySchema),
      {
        description: 'The consistency proof.',
        content: json(ref('ConsistencyProof')),
      },
      notFound('No signed tree head of one of the sizes.'),
    ),
    '/audit/integrity/keys': get('listSealKeys', 'The public keys that sign tree heads, with their validity windows.', [], {
      description: 'The keys.',
      content: json(ref('SealKeyList')),
    }),
  },
};
