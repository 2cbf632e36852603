/**
 * The export of the current filter as a file: NDJSON as the service streams it, or CSV made from it here
 * (one column per event field, in the field table's order). A spreadsheet runs a cell that starts with =,
 * +, -, @ or a control as a formula, so such cells get a leading apostrophe (OWASP's advice on CSV
 * injection): an audit trail holds text chosen by whoever was audited.
 */
import { AUDIT_EVENT_FIELDS } from '../../../src/client/auditEvent.ts';
import type { PortalApi } from '../api.ts';

export type ExportFormat = 'ndjson' | 'csv';

export interface ExportedFile {
  readonly name: string;
  readonly count: number;
  readonly truncated: boolean;
  /** The timestamp to continue from (as `until`) when truncated. */
  readonly lastTimestamp: string | undefined;
}

const COLUMNS = Object.keys(AUDIT_EVENT_FIELDS);

function csvCell(value: unknown): string {
  let text = typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function toCsv(events: ReadonlyArray<Record<string, unknown>>): string {
  const lines = [COLUMNS.join(',')];
  for (const event of events) lines.push(COLUMNS.map((column) => csvCell(event[column])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

/** Runs the export and hands the browser the file; the service records it as an audit.export event. */
export async function downloadExport(api: PortalApi, filters: Record<string, unknown>, format: ExportFormat): Promise<ExportedFile> {
  const response = await api.request('POST', '/audit/export', { query: { format: 'ndjson' }, body: filters });
  const truncated = response.headers.get('X-Service-Truncated') === 'true';
  const text = await response.text();
  const events = text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const name = `audit-trail-${stamp}.${format}`;
  const blob = format === 'csv' ? new Blob([toCsv(events)], { type: 'text/csv' }) : new Blob([text], { type: 'application/x-ndjson' });
  const url = URL.createObjectURL(blob);
  const anchor = document.createElement('a');
  anchor.href = url;
  anchor.download = name;
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  const last = events.at(-1);
  return { name, count: events.length, truncated, lastTimestamp: typeof last?.timestamp === 'string' ? last.timestamp : undefined };
}
