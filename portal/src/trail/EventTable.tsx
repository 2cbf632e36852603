/**
 * The events of a page: a table on a large screen; on a phone each row becomes a card (styles.css), its
 * cells labelled by their column's name (data-label), so that nothing needs scrolling sideways.
 */
import type { AuditEvent } from '../types.ts';
import { CopyButton, Time } from '../ui.tsx';

export function EventTable(props: { events: AuditEvent[] | undefined; busy: boolean; onSelect: (id: string) => void }) {
  if (props.events === undefined) return <p aria-busy="true">Loading the trail…</p>;
  if (props.events.length === 0) return <p class="empty">No events match.</p>;
  return (
    <table class="events cards" aria-busy={props.busy}>
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
            <td data-label="Time">
              <Time value={event.timestamp} />
            </td>
            <td data-label="Action">{event.action}</td>
            <td data-label="User">
              {event.user_id}
              <span class="muted"> ({event.user_role})</span>
            </td>
            <td data-label="Resource">
              {event.resource_type}
              <span class="muted"> {event.resource_id}</span>
            </td>
            <td data-label="PHI">{event.phi_involved ? 'PHI' : '—'}</td>
            <td data-label="Outcome">{event.success ? 'Succeeded' : 'Denied or failed'}</td>
            <td class="row-actions">
              <button
                type="button"
                class="link"
                onClick={() => props.onSelect(event.event_id)}
                aria-label={`Details of ${event.action} at ${event.timestamp}`}
              >
                Details
              </button>
              <CopyButton value={event.event_id} label={`Copy id of ${event.action} at ${event.timestamp}`}>
                Copy id
              </CopyButton>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
