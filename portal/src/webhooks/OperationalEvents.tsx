/**
 * The tenant's operational notices (docs/webhooks.md "Operational events"): endpoints failing, disabled and
 * enabled again, streams failing and recovered, newest first, as operational endpoints receive them.
 */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import type { OperationalEvent } from '../types.ts';
import { ErrorNotice, Time, useAction } from '../ui.tsx';

const PAGE_SIZE = 20;

/** What a notice says in a few words: the details an operator reads first. */
function summary(event: OperationalEvent): string {
  const details = event.details;
  const parts = [
    details.reason === undefined ? undefined : `reason: ${String(details.reason)}`,
    details.consecutive_failures === undefined ? undefined : `failures in a row: ${String(details.consecutive_failures)}`,
    details.url === undefined ? undefined : String(details.url),
  ];
  return parts.filter((part) => part !== undefined).join(' · ');
}

export function OperationalEvents(props: { api: PortalApi }) {
  const [events, setEvents] = useState<OperationalEvent[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const loading = useAction();
  const load = (after: string | null) =>
    loading.run(async () => {
      const page = await props.api.json<{ events: OperationalEvent[]; page: { next_cursor: string | null } }>(
        'GET',
        '/audit/webhooks/operational-events',
        { query: { limit: String(PAGE_SIZE), cursor: after ?? undefined } },
      );
      setEvents((shown) => (after === null ? page.events : [...shown, ...page.events]));
      setCursor(page.page.next_cursor);
    });
  useEffect(() => void load(null), []);

  return (
    <section aria-labelledby="operational-title" class="operational">
      <h2 id="operational-title">Operational events</h2>
      <p class="muted">Notices about your endpoints and streams; an operational endpoint receives them as they happen.</p>
      <ErrorNotice error={loading.error} />
      {events.length === 0 && !loading.busy && <p class="empty">No operational events.</p>}
      {events.length > 0 && (
        <table class="operational-events cards">
          <caption class="visually-hidden">Operational events, newest first</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Event</th>
              <th scope="col">About</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {events.map((event) => (
              <tr key={event.id} data-event-type={event.type}>
                <td data-label="When">
                  <Time value={event.occurred_at} />
                </td>
                <td data-label="Event">{event.type}</td>
                <td data-label="About" class="url">
                  {event.resource.id}
                </td>
                <td data-label="Details">{summary(event)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {cursor !== null && (
        <button type="button" class="secondary" disabled={loading.busy} onClick={() => load(cursor)}>
          Older events
        </button>
      )}
    </section>
  );
}
