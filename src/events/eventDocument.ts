import { AUDIT_EVENT_FIELDS, type AuditEventFieldName, type JsonTypes } from '../client/auditEvent.ts';
import { hashLeafHex } from '../client/merkleHash.ts';
import type { NewEvent } from './eventStore.ts';

/**
 * The version of the document shape this code renders, recorded with every event it stores
 * (events.document_version, migration 007). Stored documents are served as they were written, whatever
 * their version: an event is sealed in the form it was stored in, and the table is append-only, so a
 * change of shape never rewrites old rows. For a version 2 (a field added at the end of AUDIT_EVENT_FIELDS):
 * raise this constant, so that writers record 2; keep the column's default at 1, the version of writers
 * that do not name one (older pods during a rolling upgrade); and keep EVENT_JSON rendering version 1,
 * because the rows it renders, those stored without a document, all are. Code that reads fields out of a
 * stored document must then expect both versions (docs/operations.md "How events are stored").
 */
export const EVENT_DOCUMENT_VERSION = 1;

type JsonTypeOf<Name extends AuditEventFieldName> = JsonTypes[(typeof AUDIT_EVENT_FIELDS)[Name]['type']];

/** Where the value of one field comes from: in SQL, an expression on the row `e`; in the write path, the event being stored. */
interface FieldSource<Name extends AuditEventFieldName> {
  readonly column: string;
  readonly value: (event: NewEvent, timestamp: string) => JsonTypeOf<Name>;
  /**
   * The field's values are restricted, by the checks of ingestion and the types of their columns, to
   * characters JSON never escapes (a UUID, a timestamp, ACTION_PATTERN, TENANT_ID_PATTERN, an IP address or
   * ''), so they are written between quotes as they are: fewer calls on the ingest path.
   */
  readonly verbatim?: true;
}

/** The source of every field of the API's event; the type refuses a field of the table left without one. */
const FIELD_SOURCES: { readonly [Name in AuditEventFieldName]: FieldSource<Name> } = {
  event_id: { column: 'e.event_id', value: (event) => event.eventId, verbatim: true },
  timestamp: {
    column: `to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
    value: (_event, timestamp) => timestamp,
    verbatim: true,
  },
  action: { column: 'e.action', value: (event) => event.action, verbatim: true },
  user_id: { column: 'e.user_id', value: (event) => event.userId },
  user_role: { column: 'e.user_role', value: (event) => event.userRole },
  resource_type: { column: 'e.resource_type', value: (event) => event.resourceType },
  resource_id: { column: 'e.resource_id', value: (event) => event.resourceId },
  fields_accessed: { column: 'e.fields_accessed', value: (event) => event.fieldsAccessed },
  phi_involved: { column: 'e.phi_involved', value: (event) => event.phiInvolved },
  tenant_id: { column: 'e.tenant_id', value: (event) => event.tenantId, verbatim: true },
  source_ip: { column: 'e.source_ip', value: (event) => event.sourceIp, verbatim: true },
  user_agent: { column: 'e.user_agent', value: (event) => event.userAgent },
  justification: { column: 'e.justification', value: (event) => event.justification },
  success: { column: 'e.success', value: (event) => event.success },
  details: { column: 'e.details', value: (event) => event.details },
};

/** How a field is written: a boolean bare, a verbatim string between quotes, any other string escaped. */
type FieldKind = 'boolean' | 'verbatim' | 'escaped';

/** The document's fields in the table's order, each with its key as written (`{"event_id":` or `,"user_id":`). */
const DOCUMENT_FIELDS = (Object.keys(AUDIT_EVENT_FIELDS) as AuditEventFieldName[]).map((name, index) => {
  const source = FIELD_SOURCES[name] as FieldSource<AuditEventFieldName>;
  const kind: FieldKind = AUDIT_EVENT_FIELDS[name].type === 'boolean' ? 'boolean' : source.verbatim ? 'verbatim' : 'escaped';
  return { name, key: `${index === 0 ? '{' : ','}"${name}":`, kind, column: source.column, value: source.value };
});

/**
 * The same members in RFC 8785 order (names sorted by their UTF-16 code units: the names are ASCII, so a
 * plain sort), each with its key as the canonical form writes it and the index of its value in
 * DOCUMENT_FIELDS.
 */
const CANONICAL_MEMBERS = DOCUMENT_FIELDS.map(({ name }, index) => ({ name, index }))
  .sort((a, b) => (a.name < b.name ? -1 : 1))
  .map(({ name, index }, position) => ({ key: `${position === 0 ? '{' : ','}"${name}":`, index }));

/** One field's value as JSON text: a boolean bare, a verbatim string between quotes, any other string escaped. */
function valueText(field: (typeof DOCUMENT_FIELDS)[number], event: NewEvent, timestamp: string): string {
  const value = field.value(event, timestamp);
  if (field.kind === 'escaped') return JSON.stringify(value);
  if (field.kind === 'verbatim') return `"${value as string}"`;
  return value ? 'true' : 'false';
}

/**
 * The API representation of an event, rendered once when it is stored and kept in events.document;
 * `timestamp` is the event's instant in wire form. JSON.stringify escapes exactly what Postgres' to_json
 * does (quote, backslash, control characters), so EVENT_JSON renders the same bytes.
 */
export function renderEventDocument(event: NewEvent, timestamp: string): string {
  // A loop over a table built once; the ingest path renders every event it stores.
  let document = '';
  for (const field of DOCUMENT_FIELDS) document += field.key + valueText(field, event, timestamp);
  return `${document}}`;
}

/**
 * What separates a compact row's values (events.document_values, migration 026): U+001F, which JSON text never
 * holds raw (JSON.stringify escapes every control character), so a value never contains it.
 */
const VALUE_SEPARATOR = '\x1f';

export interface RenderedEvent {
  /** renderEventDocument's document. */
  readonly document: string;
  /**
   * The same document without its member names and the four values of WRITTEN_FROM_COLUMNS: the other eleven
   * value texts in order, joined by U+001F. What a compact row stores; Postgres puts the document together when
   * it is read (COMPACT_DOCUMENT).
   */
  readonly values: string;
  /**
   * The document's Merkle leaf hash, lowercase hex: SHA-256(0x00 ‖ its RFC 8785 canonical JSON), what
   * integrity/documentLeaf.ts computes from the stored document (docs/integrity.md).
   */
  readonly leafHash: string;
}

/**
 * The document, its values and its leaf hash, for the write path: the sealer then appends the hash it is
 * given instead of reading the document back and hashing it (events.leaf_hash, migration 012). Every value is
 * already JSON as RFC 8785 writes it (JSON.stringify's escaping is the RFC's, §3.2.2.2, and ingestion
 * refuses unpaired surrogates), so the canonical form is the same value texts in sorted member order: no
 * second rendering, no parse.
 */
export function renderEvent(event: NewEvent, timestamp: string): RenderedEvent {
  const texts: string[] = [];
  let document = '';
  for (const field of DOCUMENT_FIELDS) {
    const text = valueText(field, event, timestamp);
    texts.push(text);
    document += field.key + text;
  }
  let canonical = '';
  for (const member of CANONICAL_MEMBERS) canonical += member.key + texts[member.index]!;
  const values = VALUE_INDEXES.map((index) => texts[index]!).join(VALUE_SEPARATOR);
  return { document: `${document}}`, values, leafHash: hashLeafHex(`${canonical}}`) };
}

const sqlText = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** The quote that ends the field at `index` when it is a verbatim string ('' past either end). */
const closingQuote = (index: number) => (DOCUMENT_FIELDS[index]?.kind === 'verbatim' ? '"' : '');

/**
 * The same document rendered by Postgres from the columns of the row `e`, for rows stored without one
 * (migration 005), all of them version 1; byte-identical to renderEventDocument's. Free text goes through
 * to_json for escaping, verbatim strings between quotes, and the booleans print as true/false. Each line
 * opens with the previous field's closing quote, so the text reads like the document. (The composite type
 * audit_event_v2 of migration 001 is unused.)
 */
export const EVENT_JSON = DOCUMENT_FIELDS.map(({ key, kind, column }, index) => {
  const opening = sqlText(closingQuote(index - 1) + key + (kind === 'verbatim' ? '"' : ''));
  return `${opening} || ${kind === 'escaped' ? `to_json(${column})` : column}`;
})
  .concat(sqlText(`${closingQuote(DOCUMENT_FIELDS.length - 1)}}`))
  .join('\n    || ');

/**
 * The fields a compact row's document takes from its columns rather than from its values (migration 026):
 * Postgres writes them as fast as it reads them (an id, a boolean, two texts that need no escaping).
 */
const WRITTEN_FROM_COLUMNS: ReadonlySet<AuditEventFieldName> = new Set<AuditEventFieldName>([
  'event_id',
  'action',
  'phi_involved',
  'tenant_id',
]);

/** The indexes in DOCUMENT_FIELDS of the fields a compact row keeps in its values, in order. */
const VALUE_INDEXES = DOCUMENT_FIELDS.flatMap(({ name }, index) => (WRITTEN_FROM_COLUMNS.has(name) ? [] : [index]));

/**
 * The document of the row `e` if it stores one or its values (migration 026's audit_event_document): NULL for
 * a row stored with its columns only.
 */
export const COMPACT_DOCUMENT = 'audit_event_document(e.document, e.document_values, e.event_id, e.action, e.phi_involved, e.tenant_id)';

/**
 * A full row's values as a compact row stores them (migration 026), rendered by Postgres from the columns of
 * the row `e` as EVENT_JSON renders the document, without the member names: `audit-trail events compact`
 * rewrites rows with it, and keeps a row's stored document where this does not render it byte for byte.
 */
export const EVENT_VALUES = VALUE_INDEXES.map((index) => valueSql(DOCUMENT_FIELDS[index]!)).join(`\n    || E'\\x1f' || `);

/** One field's value text as Postgres renders it from its column, as EVENT_JSON writes it. */
function valueSql({ kind, column }: (typeof DOCUMENT_FIELDS)[number]): string {
  if (kind === 'verbatim') return `'"' || ${column} || '"'`;
  return kind === 'escaped' ? `to_json(${column})::text` : `${column}::text`;
}

/** The fields a compact row keeps as columns (migration 026): its keys and the filters'. */
const KEPT_COLUMNS: ReadonlySet<AuditEventFieldName> = new Set<AuditEventFieldName>([
  'event_id',
  'timestamp',
  'action',
  'user_id',
  'resource_type',
  'resource_id',
  'phi_involved',
  'tenant_id',
]);

/**
 * Whether the columns a compact row `e` keeps hold the values its document serves: true for every row as
 * written; false where one was changed behind the trail's back (its leaf still verifies, since the document
 * is the values, but the filters would find the event under another actor or resource). For `integrity check`.
 */
export const COMPACT_KEYS_MATCH = VALUE_INDEXES.flatMap((fieldIndex, position) => {
  const field = DOCUMENT_FIELDS[fieldIndex]!;
  return KEPT_COLUMNS.has(field.name) ? [`split_part(e.document_values, E'\\x1f', ${position + 1}) = ${valueSql(field)}`] : [];
}).join('\n    AND ');

/**
 * What a hot read selects of the row `e` instead of EVENT_DOCUMENT, for Node to put the document together
 * (documentOfParts): Postgres' format() of a compact row cost the list's Postgres more than its scan did
 * (BENCHMARKS.md, "List: planned once, documents put together in Node"), where Node's concatenation of the same texts costs
 * a fraction of it. The first column is the document Postgres serves by itself: a stored one (a redacted
 * event's, one of a later version), or the version-1 rendering of a row with its columns only; NULL for a
 * compact row, whose raw values and four columns follow. The same choice as audit_event_document's, in the
 * same order.
 */
export const DOCUMENT_PARTS = `CASE WHEN e.document IS NOT NULL THEN e.document WHEN e.document_values IS NULL THEN ${EVENT_JSON} END,
       e.document_values, e.event_id, e.action, e.phi_involved, e.tenant_id`;

/** The columns DOCUMENT_PARTS selects, in order, as node-postgres returns them in array mode. */
export type DocumentParts = [
  document: string | null,
  values: string | null,
  eventId: string,
  action: string,
  phiInvolved: boolean,
  tenantId: string,
];

/**
 * A compact document as alternating literal texts and value slots, derived from DOCUMENT_FIELDS (the one
 * definition of the shape): `literals[i]`, then the value of slot `slots[i]`, …, then the last literal.
 * A slot below 4 is one of the columns (event id, action, PHI flag, tenant), the others the row's values;
 * `values` is how many a row stores, `timestampValue` which of them is the timestamp's.
 */
const COLUMN_SLOTS: ReadonlyMap<AuditEventFieldName, number> = new Map<AuditEventFieldName, number>([
  ['event_id', 0],
  ['action', 1],
  ['phi_involved', 2],
  ['tenant_id', 3],
]);
export const COMPACT_TEMPLATE = (() => {
  // A value of the row's values is its JSON text, quotes included; a verbatim column goes between quotes.
  const quoted = (index: number) => {
    const field = DOCUMENT_FIELDS[index];
    return field !== undefined && field.kind === 'verbatim' && COLUMN_SLOTS.has(field.name);
  };
  const literals: string[] = [];
  const slots: number[] = [];
  let valueSlot = COLUMN_SLOTS.size;
  DOCUMENT_FIELDS.forEach(({ name, key }, index) => {
    literals.push((quoted(index - 1) ? '"' : '') + key + (quoted(index) ? '"' : ''));
    slots.push(COLUMN_SLOTS.get(name) ?? valueSlot++);
  });
  literals.push(`${quoted(DOCUMENT_FIELDS.length - 1) ? '"' : ''}}`);
  const timestampValue = VALUE_INDEXES.indexOf(DOCUMENT_FIELDS.findIndex(({ name }) => name === 'timestamp'));
  return { literals, slots, values: valueSlot - COLUMN_SLOTS.size, timestampValue };
})();

/** A compact row's value texts, each its field's JSON; undefined for a row serving a document. Throws if misshapen. */
export function compactValueTexts(parts: Readonly<DocumentParts>): string[] | undefined {
  const [document, values, eventId] = parts;
  if (document !== null || values === null) return undefined;
  const texts = values.split(VALUE_SEPARATOR);
  if (texts.length !== COMPACT_TEMPLATE.values)
    throw new Error(`event ${eventId} stores ${texts.length} values, not ${COMPACT_TEMPLATE.values}`);
  return texts;
}

/** Where a field's JSON text sits among compactValueTexts'; undefined for the four written from columns. */
export function compactValuePosition(name: AuditEventFieldName): number | undefined {
  const position = VALUE_INDEXES.indexOf(DOCUMENT_FIELDS.findIndex((field) => field.name === name));
  return position < 0 ? undefined : position;
}

/** What separates a compact row's values, as a byte. */
export const VALUE_SEPARATOR_BYTE = VALUE_SEPARATOR.charCodeAt(0);

/**
 * The served document of a row read with DOCUMENT_PARTS: byte for byte what EVENT_DOCUMENT gives in Postgres
 * (audit_event_document's format() of the same texts; test/events/documents.test.ts compares them).
 */
export function documentOfParts(parts: Readonly<DocumentParts>): string {
  const [document, , eventId, action, phiInvolved, tenantId] = parts;
  if (document !== null) return document;
  const texts = compactValueTexts(parts);
  if (texts === undefined) throw new Error(`event ${eventId} has neither a document nor values`);
  const columns = [eventId, action, phiInvolved ? 'true' : 'false', tenantId];
  const { literals, slots } = COMPACT_TEMPLATE;
  let text = '';
  for (let index = 0; index < slots.length; index += 1) {
    const slot = slots[index]!;
    text += literals[index]! + (slot < columns.length ? columns[slot]! : texts[slot - columns.length]!);
  }
  return text + literals[slots.length]!;
}
