import type { AuditEvent } from '../auditEvent.ts';
import type { WebhookDelivery, WebhookEndpoint } from '../webhookShapes.ts';

/**
 * Tables for a terminal: one line per item, in columns. A list whose items are known (a page, the endpoints)
 * is laid out to fit them: each column as wide as its widest value, so a long user id or resource keeps its
 * line aligned with the others. A walk of many pages keeps the widths of the pages before and widens a
 * column when a page needs it (its header was written with the first page's). A stream (tail, listen) has
 * no such knowledge: its columns have the default widths, and a longer value pushes its line out.
 *
 * Every value from the trail is written as text with its control characters escaped: a user id or an
 * action holding terminal escape sequences must not repaint or retitle the reader's terminal.
 */

export interface Column<T> {
  readonly title: string;
  /** The column's width before any value is known: what a stream uses, and the least a fitted table uses. */
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

/** Columns laid out for the items they have seen: widths only grow, so rows already written stay in line. */
export class TableLayout<T> {
  private readonly columns: readonly Column<T>[];
  private readonly widths: number[];

  constructor(columns: readonly Column<T>[]) {
    this.columns = columns;
    this.widths = columns.map((column) => Math.max(column.width, column.title.length));
  }

  /** Widens the columns to hold these items' values. */
  fit(items: readonly T[]): this {
    for (const item of items) {
      this.columns.forEach((column, index) => {
        this.widths[index] = Math.max(this.widths[index]!, printable(column.value(item)).length);
      });
    }
    return this;
  }

  header(): string {
    return line(this.columns.map((column, index) => [column.title, this.widths[index]!]));
  }

  row(item: T): string {
    return line(this.columns.map((column, index) => [printable(column.value(item)), this.widths[index]!]));
  }

  /** The header and a line per item, fitted to them. */
  table(items: readonly T[]): string {
    this.fit(items);
    return this.header() + items.map((item) => this.row(item)).join('');
  }
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
