import Router from '@koa/router';
import { z } from 'zod';
import type { EventWriter } from '../../events/eventWriter.ts';
import { redactEvent } from '../../lifecycle/redactions.ts';
import { requireBearerToken } from '../bearerTokens.ts';
import { jsonBody, parseBody } from '../requestInput.ts';
import type { RequestState } from '../state.ts';

const redactionBodySchema = z.strictObject({
  tenant_id: z.string(),
  event_id: z.string(),
  fields: z.array(z.string()).min(1, 'must name at least one field'),
  reference: z.string(),
  // Who asked for it, as the trail's admin.event.redact event names them; "operator" when not given.
  actor: z.string().min(1).max(256).optional(),
});

/**
 * POST /internal/v1/redactions on the internal port: what `audit-trail redact` does, for an operator's
 * tooling (docs/retention.md "Redaction"), behind an operator token. 200 with the event's redaction member;
 * the usual error shapes otherwise (404 for an unknown event or another tenant's, 422 for a field that may
 * not be redacted or that the event lacks, 409 not_yet_sealed), and then nothing has changed.
 */
export function redactionRoutes(writer: EventWriter, operatorTokens: readonly string[]): Router<RequestState> {
  const router = new Router<RequestState>();
  router.post('/internal/v1/redactions', requireBearerToken(operatorTokens, 'operator token'), jsonBody('64kb'), async (ctx) => {
    const body = parseBody(redactionBodySchema, ctx.request.body);
    const result = await redactEvent(
      writer,
      { tenantId: body.tenant_id, eventId: body.event_id, fields: body.fields, reference: body.reference },
      {
        userId: body.actor ?? 'operator',
        userRole: 'operator',
        sourceIp: ctx.state.clientAddress,
        userAgent: ctx.get('User-Agent').slice(0, 1024),
      },
    );
    ctx.body = { event_id: result.eventId, redaction: result.redaction };
  });
  return router;
}
