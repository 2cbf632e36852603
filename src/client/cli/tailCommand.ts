import { parseArgs } from 'node:util';
import { AuditTrailApiError, sleep } from '../apiTransport.ts';
import type { AuditEvent } from '../auditEvent.ts';
import type { AuditTrailClient, EventFilters } from '../auditTrailClient.ts';
import { MATCH_OPTIONS, OUTPUT_OPTION, URL_OPTION, countFlag, eventFilters, outputFormat } from './commandOptions.ts';
import { clientFrom } from './connection.ts';
import { untilInterrupted } from './interruption.ts';
import { EVENT_COLUMNS, tableHeader, tableRow } from './tableOutput.ts';

const DEFAULT_BACKLOG = 10;

/**
 * `audit-trail-client events tail [--follow]`: the latest events, oldest first as `tail` prints lines, and
 * with `--follow` every matching event after them as the service seals it, from the live endpoint
 * (docs/api.md "GET /audit/events/live"), until Ctrl-C. The live stream resumes after the last event
 * printed, so nothing falls between the backlog and the stream; the client reconnects by itself after a
 * dropped connection with the last event it received.
 */
export async function tailEvents(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...URL_OPTION,
      ...MATCH_OPTIONS,
      ...OUTPUT_OPTION,
      limit: { type: 'string' },
      follow: { type: 'boolean', short: 'f', default: false },
    },
  });
  const filters = eventFilters(values);
  const backlogSize = countFlag('--limit', values.limit) ?? DEFAULT_BACKLOG;
  // A stream has no end for a JSON document to close: one event per line instead.
  const format = outputFormat(values.output, ['table', 'ndjson'] as const);
  const client = clientFrom(values.url);
  const write = (event: AuditEvent) =>
    process.stdout.write(format === 'table' ? tableRow(EVENT_COLUMNS, event) : `${JSON.stringify(event)}\n`);
  const backlog = (await client.listPage({ ...filters, limit: backlogSize })).events.reverse();
  if (format === 'table') process.stdout.write(tableHeader(EVENT_COLUMNS));
  for (const event of backlog) write(event);
  if (!values.follow) return 0;
  await untilInterrupted((signal) => follow(client, filters, backlog.at(-1)?.event_id, write, signal));
  return 0;
}

/**
 * The live stream after `lastEventId`. The newest event listed may not be sealed yet (the service seals
 * within its SEAL_INTERVAL), and the stream can only resume after a sealed one: it answers 409
 * not_yet_sealed, and the stream is asked again a second later, from the last event written.
 */
async function follow(
  client: AuditTrailClient,
  filters: EventFilters,
  after: string | undefined,
  write: (event: AuditEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  let lastEventId = after;
  for (;;) {
    try {
      for await (const event of client.live({ ...filters, lastEventId, signal })) {
        write(event);
        lastEventId = event.event_id;
      }
      return;
    } catch (error) {
      if (!(error instanceof AuditTrailApiError && error.code === 'not_yet_sealed') || signal.aborted) throw error;
      await sleep(1000, signal);
    }
  }
}
