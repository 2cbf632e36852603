import Router from '@koa/router';
import { z } from 'zod';
import type { EffectiveRetention, RetentionPolicies } from '../../lifecycle/retentionPolicies.ts';
import { formatTimestamp } from '../../events/eventFields.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { parseQuery } from '../requestInput.ts';
import { principalOf, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

/** GET /audit/retention: the caller's tenant reads the retention that applies to its trail (docs/retention.md). */
export function retentionRoutes(policies: RetentionPolicies): Router<RequestState> {
  const router = new Router<RequestState>();
  router.get('/audit/retention', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = retentionBody(await policies.effective(principalOf(ctx).tenantId));
  });
  return router;
}

function retentionBody(retention: EffectiveRetention) {
  return {
    retention: {
      tenant_id: retention.tenantId,
      source: retention.source,
      retain: retention.period?.text ?? null,
      locked: retention.locked,
      archive: retention.archive !== null,
      kept_since: retention.keptSince ? formatTimestamp(retention.keptSince.getTime()) : null,
      updated_at: retention.updatedAt ? formatTimestamp(retention.updatedAt.getTime()) : null,
    },
  };
}

const retentionSchema = z
  .looseObject({
    retention: z.looseObject({
      tenant_id: z.string(),
      source: z.enum(['policy', 'default', 'none']).meta({
        description: "policy: the tenant's own RetentionPolicy; default: the deployment's default; none: events are kept forever.",
      }),
      retain: z.string().nullable().meta({ description: 'How long events are kept (30d, 18mo, 6y); null when forever.' }),
      locked: z.boolean().meta({ description: 'A locked policy can be lengthened, never shortened or removed.' }),
      archive: z.boolean().meta({ description: 'Whether events are to be archived before they expire.' }),
      kept_since: z.string().nullable().meta({
        format: 'date-time',
        description: 'Events before this instant are past their period and due to be removed; null when forever.',
      }),
      updated_at: z.string().nullable().meta({ format: 'date-time', description: "When the tenant's own policy last changed." }),
    }),
  })
  .meta({ id: 'Retention' });

export const retentionOpenApi: OpenApiContribution = {
  schemas: [retentionSchema],
  paths: {
    '/audit/retention': {
      get: {
        operationId: 'getRetention',
        summary: "How long the tenant's events are kept.",
        security: [{ apiKey: [] }],
        parameters: [],
        responses: {
          '200': authenticatedResponse({ description: 'The retention in force.', content: json(ref('Retention')) }),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
  },
};
