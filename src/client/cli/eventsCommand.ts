import { parseArgs } from 'node:util';
import {
  MATCH_OPTIONS,
  OUTPUT_OPTION,
  PAGING_OPTIONS,
  URL_OPTION,
  WINDOW_OPTIONS,
  eventFilters,
  outputFormat,
  pagingOf,
} from './commandOptions.ts';
import { clientFrom } from './connection.ts';
import { onePage, writePages } from './pagedOutput.ts';
import { EVENT_COLUMNS } from './tableOutput.ts';
import { UsageError } from './usage.ts';

/** `audit-trail-client events list|tail`. */
export async function runEvents(args: string[]): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand === 'list') return listEvents(rest);
  if (subcommand === 'tail') return (await import('./tailCommand.ts')).tailEvents(rest);
  throw new UsageError(subcommand === undefined ? 'events takes list or tail' : `unknown events command "${subcommand}"`);
}

/**
 * One page of events, newest first, or with `--all` every page of the window, following the cursor. The
 * filters are the API's own (docs/api.md "GET /audit/events"); `--search` is its q, whose page may stop short
 * of full (a search walks a bounded number of events a request) and says where to go on.
 */
async function listEvents(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...URL_OPTION, ...MATCH_OPTIONS, ...WINDOW_OPTIONS, ...PAGING_OPTIONS, ...OUTPUT_OPTION, search: { type: 'string' } },
  });
  const filters = { ...eventFilters(values), ...(values.search === undefined ? {} : { q: values.search }) };
  const { limit, cursor, all } = pagingOf(values);
  const format = outputFormat(values.output, ['table', 'json', 'ndjson'] as const);
  const client = clientFrom(values.url);
  const pages = all ? client.listPages({ ...filters, limit }) : onePage(() => client.listPage({ ...filters, limit, cursor }));
  await writePages(pages, { member: 'events', items: (page) => page.events, columns: EVENT_COLUMNS, format, all });
  return 0;
}
