import type { AuditEvent } from '../auditEvent.ts';
import type { WebhookDelivery, WebhookEndpoint } from '../webhookShapes.ts';

/**
 * Tables for a terminal: one line per item, columns of fixed width so that a stream (tail, listen) lines
 * up without knowing what comes next; a longer value pushes its line out rather than being cut.
 *
 * Every value from the trail is written as text with its control characters escaped: a user id or an
 * action holding terminal escape sequences must not repaint or retitle the reader's terminal.
 */

export interface Column<T> {
  readonly title: string;
  readonly width: number;
  readonly value: (item: T) => string;
}

// C0 and C1 control characters, DEL, and the line and paragraph separators.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** The text with each control character as a visible escape (`\u001b`). */
export function printable(value: unknown): string {
  return String(value).replace(CONTROL, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function tableHeader<T>(columns: readonly Column<T>[]): string {
  return line(columns.map((column) => [column.title, column.width]));
}

export function tableRow<T>(columns: readonly Column<T>[], item: T): string {
  return line(columns.map((column) => [printable(column.value(item)), column.width]));
}

function line(cells: Array<[string, number]>): string {
  return `${cells
    .map(([text, width], index) => (index === cells.length - 1 ? text : text.padEnd(width)))
    .join('  ')
    .trimEnd()}\n`;
}

export const EVENT_COLUMNS: readonly Column<AuditEvent>[] = [
  { title: 'TIMESTAMP', width: 24, value: (event) => event.timestamp },
  { title: 'ACTION', width: 22, value: (event) => event.action },
  { title: 'USER', width: 14, value: (event) => event.user_id },
  { title: 'RESOURCE', width: 28, value: (event) => `${event.resource_type}/${event.resource_id}` },
  { title: 'PHI', width: 3, value: (event) => (event.phi_involved ? 'yes' : 'no') },
  { title: 'OK', width: 3, value: (event) => (event.success ? 'yes' : 'no') },
  { title: 'EVENT_ID', width: 36, value: (event) => event.event_id },
];

export const DELIVERY_COLUMNS: readonly Column<WebhookDelivery>[] = [
  { title: 'DELIVERY_ID', width: 36, value: (delivery) => delivery.id },
  { title: 'STATUS', width: 9, value: (delivery) => delivery.status },
  { title: 'ATTEMPTS', width: 8, value: (delivery) => String(delivery.attempts) },
  { title: 'LAST', width: 4, value: (delivery) => String(delivery.last_status_code ?? '-') },
  { title: 'CREATED_AT', width: 24, value: (delivery) => delivery.created_at },
  { title: 'ACTION', width: 22, value: (delivery) => delivery.action ?? '-' },
  { title: 'EVENT_ID', width: 36, value: (delivery) => delivery.event_id },
];

export const ENDPOINT_COLUMNS: readonly Column<WebhookEndpoint>[] = [
  { title: 'WEBHOOK_ID', width: 35, value: (endpoint) => endpoint.id },
  { title: 'ACTIVE', width: 6, value: (endpoint) => (endpoint.active ? 'yes' : 'no') },
  { title: 'FAILURES', width: 8, value: (endpoint) => String(endpoint.consecutive_failures ?? 0) },
  { title: 'FILTER', width: 20, value: (endpoint) => (endpoint.event_filter.length === 0 ? '*' : endpoint.event_filter.join(',')) },
  { title: 'URL', width: 0, value: (endpoint) => endpoint.url },
];
