import { parseArgs } from 'node:util';
import type { AuditEvent } from '../auditEvent.ts';
import { MATCH_OPTIONS, OUTPUT_OPTION, URL_OPTION, countFlag, eventFilters, outputFormat } from './commandOptions.ts';
import { clientFrom } from './connection.ts';
import { followAfter, untilInterrupted } from './liveFollowing.ts';
import { EVENT_COLUMNS, TableLayout } from './tableOutput.ts';

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
  const backlog = (await client.listPage({ ...filters, limit: backlogSize })).events.reverse();
  // The backlog sets the widths; what follows is a stream, written in them (a longer value pushes its line out).
  const layout = new TableLayout(EVENT_COLUMNS).fit(backlog);
  const write = (event: AuditEvent) => process.stdout.write(format === 'table' ? layout.row(event) : `${JSON.stringify(event)}\n`);
  const writeBacklog = () => {
    if (format === 'table') process.stdout.write(layout.header());
    for (const event of backlog) write(event);
  };
  if (!values.follow) {
    writeBacklog();
    return 0;
  }
  // The backlog is written once Ctrl-C is handled: one who stops as soon as it appears gets exit 0.
  await untilInterrupted((signal) => {
    writeBacklog();
    return followAfter(client, { ...filters, lastEventId: backlog.at(-1)?.event_id, signal }, write);
  });
  return 0;
}
