import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { WEBHOOK_FAN_OUT } from '../delivery/fanOut.ts';
import { EventWriter } from '../events/eventWriter.ts';
import { redactEvent } from '../lifecycle/redactions.ts';
import type { Logger } from '../platform/logger.ts';
import { UsageError } from './usage.ts';

/**
 * `audit-trail redact --tenant T --event ID --fields a,b --reference R`: an operator honours an erasure
 * request (docs/retention.md "Redaction"). Prints what the event's `redaction` member now says; a refused
 * request (unknown event, a field that may not be redacted or that the event lacks) changes nothing and
 * exits 1 with the reason.
 */
export async function runRedact(args: string[], config: Config, log: Logger): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      tenant: { type: 'string' },
      event: { type: 'string' },
      fields: { type: 'string' },
      reference: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (!values.tenant || !values.event || !values.fields || !values.reference)
    throw new UsageError('redact needs --tenant, --event, --fields and --reference');
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 1,
    applicationName: 'audit-trail redact',
    log,
  });
  try {
    const result = await redactEvent(
      new EventWriter(db, WEBHOOK_FAN_OUT),
      { tenantId: values.tenant, eventId: values.event, fields: values.fields.split(','), reference: values.reference },
      { userId: config.operatorActor, userRole: 'operator' },
    );
    if (values.json) process.stdout.write(`${JSON.stringify({ event_id: result.eventId, redaction: result.redaction })}\n`);
    else process.stdout.write(`redacted ${result.fields.join(', ')} of event ${result.eventId} (tenant ${values.tenant})\n`);
    return 0;
  } finally {
    await db.close();
  }
}
