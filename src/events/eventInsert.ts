import { booleanArrayLiteral, lineSeparatedList, textArrayLiteral } from '../db/arrayLiteral.ts';
import { EVENT_DOCUMENT_VERSION, renderEvent } from './eventDocument.ts';
import type { NewEvent } from './eventStore.ts';
import type { StoredForm } from './storedFormSetting.ts';

/**
 * The INSERT of a batch whose columns arrive as array literals or line-separated lists, unnested
 * server-side, with the version the documents were rendered in (a constant of the statement) and their leaf
 * hashes as the last parameter: 32 bytes per event, concatenated in the events' order (one bytea rather than
 * an array of 500 small ones). Rows that already exist, same tenant, timestamp and id, are a producer's retry
 * and are skipped; RETURNING yields the rows actually stored. Meant to be the first part of one statement
 * that does the rest of a write with those rows (events/storeBatch.ts). $1 is always the tenants.
 *
 * Two forms (migration 026): `compact` stores each event once, the columns keys and filters need and the
 * document's values ($9); `full`, the form of earlier releases, every field as a column and the rendered
 * document ($16), which a database keeps while pods of the previous release may still read it.
 */
/**
 * What the rows stored by a batch carry besides their keys: the columns their served document is put
 * together from (audit_event_document, migration 026), so that the rest of the statement can read an
 * event's document (storedDocument) without reading the table its own insert is not visible in.
 */
const STORED_DOCUMENT_COLUMNS = 'document, document_values, phi_involved';

/** The served document of the row `row` of a batch's stored rows, as reads serve it (eventStore.EVENT_DOCUMENT). */
export function storedDocument(row: string): string {
  return `audit_event_document(${row}.document, ${row}.document_values, ${row}.event_id, ${row}.action, ${row}.phi_involved, ${row}.tenant_id)`;
}

const INSERT_COMPACT = `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved,
                         document_values, document_version, leaf_hash,
                         user_role, fields_accessed, source_ip, user_agent, justification, success, details)
     SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.resource_type, u.resource_id, u.phi_involved,
            u.document_values, ${EVENT_DOCUMENT_VERSION}::smallint, substring($10::bytea FROM u.position::int * 32 - 31 FOR 32),
            -- Named, so that their defaults (for rows inserted by hand) do not fill them.
            NULL, NULL, NULL, NULL, NULL, NULL, NULL
       FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                   $8::boolean[], string_to_array($9, E'\\n'))
            WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved,
                                 document_values, position)
     ON CONFLICT DO NOTHING
     RETURNING tenant_id, event_id, action, occurred_at, ${STORED_DOCUMENT_COLUMNS}`;

const INSERT_FULL = `INSERT INTO events (tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                         fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document,
                         document_version, leaf_hash)
     SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.user_role, u.resource_type, u.resource_id,
            u.fields_accessed, u.phi_involved, u.source_ip, u.user_agent, u.justification, u.success, u.details, u.document,
            ${EVENT_DOCUMENT_VERSION}::smallint, substring($17::bytea FROM u.position::int * 32 - 31 FOR 32)
       FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                   $8::text[], $9::text[], $10::boolean[], $11::text[], $12::text[], $13::text[],
                   $14::boolean[], string_to_array($15, E'\\n'), string_to_array($16, E'\\n'))
            WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
                                 fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document,
                                 position)
     ON CONFLICT DO NOTHING
     RETURNING tenant_id, event_id, action, occurred_at, ${STORED_DOCUMENT_COLUMNS}`;

export const INSERT_EVENTS: Readonly<Record<StoredForm, string>> = { compact: INSERT_COMPACT, full: INSERT_FULL };

/** The parameters of INSERT_EVENTS[form]; `timestamps` are the events' instants in wire form. */
export function eventColumnArrays(events: readonly NewEvent[], timestamps: readonly string[], form: StoredForm): Array<string | Buffer> {
  const column = (value: (event: NewEvent) => string) => textArrayLiteral(events.map(value));
  const rendered = events.map((event, index) => renderEvent(event, timestamps[index]!));
  let leafHashes = '';
  for (const { leafHash } of rendered) leafHashes += leafHash;
  // A Buffer goes to Postgres in binary: neither side encodes or decodes hex.
  const hashes = Buffer.from(leafHashes, 'hex');
  const keys = [
    column((event) => event.tenantId),
    textArrayLiteral(timestamps),
    column((event) => event.eventId),
    column((event) => event.action),
  ];
  if (form === 'compact') {
    return [
      ...keys,
      column((event) => event.userId),
      column((event) => event.resourceType),
      column((event) => event.resourceId),
      booleanArrayLiteral(events.map((event) => event.phiInvolved)),
      // Value texts are JSON: never a raw line feed.
      lineSeparatedList(rendered.map(({ values }) => values)),
      hashes,
    ];
  }
  return [
    ...keys,
    column((event) => event.userId),
    column((event) => event.userRole),
    column((event) => event.resourceType),
    column((event) => event.resourceId),
    column((event) => event.fieldsAccessed),
    booleanArrayLiteral(events.map((event) => event.phiInvolved)),
    column((event) => event.sourceIp),
    column((event) => event.userAgent),
    column((event) => event.justification),
    booleanArrayLiteral(events.map((event) => event.success)),
    // JSON text: objects, never empty, never a raw line feed.
    lineSeparatedList(events.map((event) => event.details)),
    lineSeparatedList(rendered.map(({ document }) => document)),
    hashes,
  ];
}
