/** The trail: the tenant's events newest first, searched, filtered and paged as the list API does, with each event's detail. */
import { useEffect, useState } from 'preact/hooks';
import type { EventCount, Page, PortalApi } from '../api.ts';
import { formatTime } from '../time.ts';
import type { AuditEvent, PortalSession } from '../types.ts';
import { ErrorNotice, useAction } from '../ui.tsx';
import { EventDetail } from './EventDetail.tsx';
import { EventTable } from './EventTable.tsx';
import { downloadExport, type ExportFormat, type ExportedFile } from './exportDownload.ts';
import { exportBody, type Filters } from './filters.ts';
import { TrailFilters } from './TrailFilters.tsx';

export const PAGE_SIZE = 50;

/**
 * A search walks at most 5,000 events a request (docs/api.md "Search"); a page of the portal asks for up to
 * this many walks to fill itself before it shows what it found and how far back it searched.
 */
const SEARCH_WALKS = 4;

interface Shown {
  readonly events: AuditEvent[];
  readonly nextCursor: string | null;
  readonly searchedTo: string | undefined;
}

/** One page of the portal: one list request, or for a search as many walks as fill the page (at most SEARCH_WALKS). */
async function loadPage(api: PortalApi, filters: Filters, cursor: string | undefined): Promise<Shown> {
  const events: AuditEvent[] = [];
  let next = cursor;
  for (let walk = 0; ; walk += 1) {
    const page: Page<AuditEvent> = await api.listEvents(filters, next, PAGE_SIZE - events.length);
    events.push(...page.items);
    next = page.nextCursor ?? undefined;
    const walkedShort = page.searchedTo !== undefined && page.nextCursor !== null;
    if (!walkedShort || events.length >= PAGE_SIZE || walk + 1 >= SEARCH_WALKS) {
      return { events, nextCursor: page.nextCursor, searchedTo: walkedShort ? page.searchedTo : undefined };
    }
  }
}

function Summary(props: { shown: Shown | undefined; count: EventCount | undefined; searching: boolean }) {
  const { shown, count, searching } = props;
  if (!shown) return null;
  let text: string;
  if (searching) {
    text = `${shown.events.length} found${shown.events.length === PAGE_SIZE ? ' on this page' : ''}`;
    if (shown.searchedTo) text += `, searching back to ${formatTime(shown.searchedTo)} so far: Older searches on`;
  } else if (count) {
    const events = count.count === 1 ? 'event' : 'events';
    text = count.capped ? `More than ${count.count.toLocaleString('en')} events` : `${count.count.toLocaleString('en')} ${events}`;
  } else {
    return null;
  }
  return (
    <p class="summary" role="status" data-testid="result-count">
      {text}
    </p>
  );
}

export function TrailPage(props: { api: PortalApi; session: PortalSession; firstPage?: Promise<Page<AuditEvent>> }) {
  const { api, session } = props;
  const [filters, setFilters] = useState<Filters>({});
  // The cursors of the pages before this one, so Newer can go back.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [shown, setShown] = useState<Shown | undefined>();
  const [count, setCount] = useState<EventCount | undefined>();
  const [selected, setSelected] = useState<string | undefined>();
  const [exported, setExported] = useState<ExportedFile | undefined>();
  const loading = useAction();
  const exporting = useAction();
  const cursor = cursors.at(-1);

  // The unfiltered first page may be on its way already (main.tsx): taken once, later views ask for their own.
  const [firstPage, setFirstPage] = useState(props.firstPage);
  useEffect(() => {
    const prefetched = firstPage;
    if (prefetched) setFirstPage(undefined);
    void loading.run(async () => {
      if (prefetched) {
        const page = await prefetched;
        setShown({ events: page.items, nextCursor: page.nextCursor, searchedTo: undefined });
      } else {
        setShown(await loadPage(api, filters, cursor));
      }
    });
  }, [filters, cursor]);
  // The count of what the filters match, beside the list (a search is not counted: its walk is bounded).
  useEffect(() => {
    setCount(undefined);
    if (filters.q !== undefined) return;
    let current = true;
    api.countEvents(filters).then(
      (counted) => current && setCount(counted),
      () => undefined,
    );
    return () => {
      current = false;
    };
  }, [filters]);

  const change = (next: Filters) => {
    setFilters(next);
    setCursors([undefined]);
  };
  const exportAs = (format: ExportFormat) => exporting.run(async () => setExported(await downloadExport(api, exportBody(filters), format)));
  const canExport = session.capabilities.includes('audit:export');

  return (
    <section aria-labelledby="trail-title">
      <h1 id="trail-title">Audit trail</h1>
      <TrailFilters api={api} filters={filters} onChange={change} />
      <form
        class="toolbar"
        aria-label="Find an event"
        onSubmit={(event) => {
          event.preventDefault();
          const id = String(new FormData(event.currentTarget as HTMLFormElement).get('event_id') ?? '').trim();
          if (id) setSelected(id);
        }}
      >
        <label>
          Event id
          <input name="event_id" autocomplete="off" spellcheck={false} size={38} />
        </label>
        <button type="submit" class="secondary">
          Open event
        </button>
      </form>
      {canExport && (
        <div class="toolbar">
          <span>Export these filters:</span>
          <button type="button" class="secondary" disabled={exporting.busy || filters.q !== undefined} onClick={() => exportAs('ndjson')}>
            Download NDJSON
          </button>
          <button type="button" class="secondary" disabled={exporting.busy || filters.q !== undefined} onClick={() => exportAs('csv')}>
            Download CSV
          </button>
          {filters.q !== undefined && <span class="muted">An export takes the filters, not a search: clear the search to export.</span>}
          <span role="status">
            {exported &&
              `${exported.name}: ${exported.count} events.${exported.truncated ? ` The export stops at 10,000: set Until to ${exported.lastTimestamp} for the next part.` : ''}`}
          </span>
          <ErrorNotice error={exporting.error} />
        </div>
      )}
      <ErrorNotice error={loading.error} />
      <Summary shown={loading.busy ? undefined : shown} count={count} searching={filters.q !== undefined} />
      <EventTable events={shown?.events} busy={loading.busy} onSelect={setSelected} />
      <nav class="pager" aria-label="Pages">
        <button
          type="button"
          class="secondary"
          disabled={cursors.length <= 1 || loading.busy}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </button>
        <span>Page {cursors.length}</span>
        <button
          type="button"
          class="secondary"
          disabled={!shown?.nextCursor || loading.busy}
          onClick={() => shown?.nextCursor && setCursors([...cursors, shown.nextCursor])}
        >
          Older
        </button>
      </nav>
      {selected && <EventDetail api={api} session={session} eventId={selected} onClose={() => setSelected(undefined)} />}
    </section>
  );
}
