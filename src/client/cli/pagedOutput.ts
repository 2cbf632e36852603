import type { OutputFormat } from './commandOptions.ts';
import { type Column, TableLayout } from './tableOutput.ts';

/** A page of a cursor-paged list (events, deliveries), as the API answers it. */
export interface ListPage {
  readonly page: { next_cursor: string | null; has_more: boolean };
}

/**
 * Writes the pages of a list in the chosen format. One page (no `--all`): `json` is the API's answer
 * itself, and the other formats say on stderr how to ask for the next page, so that stdout holds only
 * items. All pages (`--all`): `json` is one object holding every item, written as it arrives (a long walk
 * never sits in memory), `ndjson` and `table` one line per item.
 */
export async function writePages<P extends ListPage, T>(
  pages: AsyncIterable<P>,
  options: { member: string; items: (page: P) => readonly T[]; columns: readonly Column<T>[]; format: OutputFormat; all: boolean },
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): Promise<void> {
  const { member, items, columns, format, all } = options;
  const layout = new TableLayout(columns);
  let written = 0;
  let first = true;
  for await (const page of pages) {
    if (format === 'table') layout.fit(items(page));
    // Nothing is written before the first answer: a refused request leaves stdout empty.
    if (first && format === 'table') out.write(layout.header());
    if (first && format === 'json' && all) out.write(`{${JSON.stringify(member)}:[`);
    first = false;
    if (format === 'json' && !all) {
      out.write(`${JSON.stringify(page)}\n`);
      return;
    }
    for (const item of items(page)) {
      if (format === 'json') out.write(`${written > 0 ? ',' : ''}\n${JSON.stringify(item)}`);
      else out.write(format === 'ndjson' ? `${JSON.stringify(item)}\n` : layout.row(item));
      written += 1;
    }
    if (!all) {
      if (page.page.has_more && page.page.next_cursor) err.write(`more: --cursor ${page.page.next_cursor}\n`);
      return;
    }
  }
  if (format === 'json') out.write(`\n]}\n`);
}

/** A single page as the walk writePages takes. */
export async function* onePage<P>(fetchPage: () => Promise<P>): AsyncGenerator<P> {
  yield await fetchPage();
}
