/**
 * Every time the portal shows, in one form: the person's own time zone, named ("Mar 2, 2026, 09:15:00 UTC"),
 * so that the list, an event's detail and a delivery's attempts say the same instant the same way. The exact
 * value the service sent stays on the element (dateTime, and a title to hover).
 */

// One formatter for the page: toLocaleString() builds a new one per call, which a page of rows pays 50 times.
let formatter: Intl.DateTimeFormat | undefined;

export function formatTime(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  formatter ??= new Intl.DateTimeFormat(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'short',
  });
  return formatter.format(date);
}

/** The person's time zone, as the page names it beside a time range ("Europe/Berlin"). */
export function timeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/** A datetime-local input's value (local time) as RFC 3339 UTC; undefined when empty or invalid. */
export function localInputToIso(value: string): string | undefined {
  if (!value) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** An instant as a datetime-local input's value, in local time to the second. */
export function isoToLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 19);
}
