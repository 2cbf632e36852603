/** The trail: the tenant's events newest first, filtered and paged as the list API does, with each event's detail. */
import { useEffect, useState } from 'preact/hooks';
import type { Page, PortalApi } from '../api.ts';
import type { AuditEvent, PortalSession } from '../types.ts';
import { ErrorNotice, Time, localInputToIso, useAction } from '../ui.tsx';
import { EventDetail } from './EventDetail.tsx';
import { downloadExport, type ExportFormat, type ExportedFile } from './exportDownload.ts';

export const PAGE_SIZE = 50;

/** The list API's filters this portal offers (the list API's query parameters, docs/api.md). */
const LIST_FILTERS: ReadonlySet<string> = new Set(['action', 'resource_type', 'resource_id', 'user_id', 'phi_involved', 'since', 'until']);

/** The list API's filters, as its query parameters (docs/api.md). */
export type Filters = Record<string, string | undefined>;

function filtersFrom(form: HTMLFormElement): Filters {
  const data = new FormData(form);
  const text = (name: string) => {
    const value = String(data.get(name) ?? '').trim();
    return value === '' ? undefined : value;
  };
  const phi = text('phi_involved');
  return {
    action: text('action'),
    resource_type: text('resource_type'),
    user_id: text('user_id'),
    resource_id: text('resource_id'),
    phi_involved: phi === 'true' || phi === 'false' ? phi : undefined,
    since: localInputToIso(String(data.get('since') ?? '')),
    until: localInputToIso(String(data.get('until') ?? '')),
  };
}

/** The export takes the same filters in JSON, phi_involved as a boolean. */
function exportBody(filters: Filters): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(filters)) {
    if (value !== undefined) body[name] = name === 'phi_involved' ? value === 'true' : value;
  }
  return body;
}

export function TrailPage(props: { api: PortalApi; session: PortalSession; firstPage?: Promise<Page<AuditEvent>> }) {
  const { api, session } = props;
  const [filters, setFilters] = useState<Filters>({});
  // The cursors of the pages before this one, so Previous can go back.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [events, setEvents] = useState<AuditEvent[] | undefined>();
  const [nextCursor, setNextCursor] = useState<string | null>(null);
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
      const page = await (prefetched ?? api.listEvents(filters, cursor, PAGE_SIZE));
      setEvents(page.items);
      setNextCursor(page.nextCursor);
    });
  }, [filters, cursor]);

  const apply = (event: Event) => {
    event.preventDefault();
    setFilters(filtersFrom(event.currentTarget as HTMLFormElement));
    setCursors([undefined]);
  };
  const exportAs = (format: ExportFormat) => exporting.run(async () => setExported(await downloadExport(api, exportBody(filters), format)));
  const canExport = session.capabilities.includes('audit:export');
  const has = (name: string) => LIST_FILTERS.has(name);

  return (
    <section aria-labelledby="trail-title">
      <h1 id="trail-title">Audit trail</h1>
      <form class="filters" onSubmit={apply} aria-label="Filters">
        <label>
          Action (exact)
          <input name="action" placeholder="phi.read" autocomplete="off" />
        </label>
        <label>
          Resource type
          <input name="resource_type" placeholder="patient_record" autocomplete="off" />
        </label>
        {has('resource_id') && (
          <label>
            Resource id
            <input name="resource_id" autocomplete="off" />
          </label>
        )}
        {has('user_id') && (
          <label>
            User id
            <input name="user_id" autocomplete="off" />
          </label>
        )}
        <label>
          PHI
          <select name="phi_involved">
            <option value="">Any</option>
            <option value="true">PHI only</option>
            <option value="false">Without PHI</option>
          </select>
        </label>
        <label>
          From
          <input name="since" type="datetime-local" step="1" />
        </label>
        <label>
          Until
          <input name="until" type="datetime-local" step="1" />
        </label>
        <button type="submit">Apply filters</button>
      </form>
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
          <button type="button" class="secondary" disabled={exporting.busy} onClick={() => exportAs('ndjson')}>
            Download NDJSON
          </button>
          <button type="button" class="secondary" disabled={exporting.busy} onClick={() => exportAs('csv')}>
            Download CSV
          </button>
          <span role="status">
            {exported &&
              `${exported.name}: ${exported.count} events.${exported.truncated ? ` The export stops at 10,000: set Until to ${exported.lastTimestamp} for the next part.` : ''}`}
          </span>
          <ErrorNotice error={exporting.error} />
        </div>
      )}
      <ErrorNotice error={loading.error} />
      <EventTable events={events} busy={loading.busy} onSelect={setSelected} />
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
          disabled={nextCursor === null || loading.busy}
          onClick={() => nextCursor && setCursors([...cursors, nextCursor])}
        >
          Older
        </button>
      </nav>
      {selected && <EventDetail api={api} session={session} eventId={selected} onClose={() => setSelected(undefined)} />}
    </section>
  );
}

function EventTable(props: { events: AuditEvent[] | undefined; busy: boolean; onSelect: (id: string) => void }) {
  if (props.events === undefined) return <p aria-busy="true">Loading the trail…</p>;
  if (props.events.length === 0) return <p class="empty">No events match these filters.</p>;
  return (
    <table class="events" aria-busy={props.busy}>
      <caption class="visually-hidden">Events, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Action</th>
          <th scope="col">User</th>
          <th scope="col">Resource</th>
          <th scope="col">PHI</th>
          <th scope="col">Outcome</th>
          <th scope="col">
            <span class="visually-hidden">Details</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((event) => (
          <tr key={event.event_id} data-event-id={event.event_id}>
            <td>
              <Time value={event.timestamp} />
            </td>
            <td>{event.action}</td>
            <td>
              {event.user_id}
              <span class="muted"> ({event.user_role})</span>
            </td>
            <td>
              {event.resource_type}
              <span class="muted"> {event.resource_id}</span>
            </td>
            <td>{event.phi_involved ? 'PHI' : '—'}</td>
            <td>{event.success ? 'Succeeded' : 'Denied or failed'}</td>
            <td>
              <button
                type="button"
                class="link"
                onClick={() => props.onSelect(event.event_id)}
                aria-label={`Details of ${event.action} at ${event.timestamp}`}
              >
                Details
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
