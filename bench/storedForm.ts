/**
 * Stored-form benchmark (issue 30): which form of an event to store once. Four tables with the API's indexes
 * (primary key, event_id, and one per list filter: action, resource_type, phi_involved, user_id, resource_id),
 * in a scratch database of its own that it drops at the end, hold the same events:
 *
 *   reference  each field once as a column (the ingest benchmark's baseline table)
 *   today       today's form: the columns, plus the served document, its version, its leaf hash, ingested_at
 *   document   the served document plus only the columns the keys and indexes need
 *   columns    the columns plus version, leaf hash and ingested_at; the document rendered on read
 *   values     the columns the keys and indexes need, plus the document's fifteen value texts without their
 *              names (separated by U+001F, which JSON text never holds raw), version, leaf hash, ingested_at;
 *              a read puts the names back between the values
 *
 * It prints, per form: bytes on disk per event (heap, TOAST and indexes); the write statement's wall time per
 * event in one session (batches of 500 through unnest, as the write path sends them, forms interleaved batch
 * by batch); and a page of 101 rows in list order read in one session, wall time per page, with the
 * document as stored, rendered by Postgres (EVENT_JSON) or rendered by Node from the columns.
 *
 *   node bench/storedForm.ts            (BENCH_STORED_FORM_EVENTS=400000, BENCH_STORED_FORM_TENANTS=100)
 */
import { producerNewEvent } from './support/producers.ts';
import pg from 'pg';
import { booleanArrayLiteral, lineSeparatedList, textArrayLiteral } from '../src/db/arrayLiteral.ts';
import { EVENT_JSON, renderEvent, renderEventDocument } from '../src/events/eventDocument.ts';
import type { NewEvent } from '../src/events/eventStore.ts';
import { AUDIT_EVENT_FIELDS } from '../src/client/auditEvent.ts';
import { SERVER_URL } from './support/listDataset.ts';

const DATABASE = 'audit_bench_stored_form';
const EVENTS = Number(process.env.BENCH_STORED_FORM_EVENTS ?? 400_000);
const TENANTS = Number(process.env.BENCH_STORED_FORM_TENANTS ?? 100);
const WRITE_BATCHES = 40;
const BATCH = 500;
const PAGES = 600;

const FIELDS = `tenant_id text NOT NULL, occurred_at timestamptz NOT NULL, event_id uuid NOT NULL, action text NOT NULL,
  user_id text NOT NULL, user_role text NOT NULL, resource_type text NOT NULL, resource_id text NOT NULL,
  fields_accessed text NOT NULL, phi_involved boolean NOT NULL, source_ip text NOT NULL, user_agent text NOT NULL,
  justification text NOT NULL, success boolean NOT NULL, details text NOT NULL`;
const KEY_FIELDS = `tenant_id text NOT NULL, occurred_at timestamptz NOT NULL, event_id uuid NOT NULL, action text NOT NULL,
  user_id text NOT NULL, resource_type text NOT NULL, resource_id text NOT NULL, phi_involved boolean NOT NULL`;
const SEALING = `ingested_at timestamptz NOT NULL DEFAULT now(), document_version smallint NOT NULL DEFAULT 1, leaf_hash bytea`;
const FORMS = {
  reference: FIELDS,
  today: `${FIELDS}, ${SEALING}, document text`,
  document: `${KEY_FIELDS}, ${SEALING}, document text NOT NULL`,
  columns: `${FIELDS}, ${SEALING}, document text`,
  values: `${KEY_FIELDS}, ${SEALING}, document_values text NOT NULL`,
} as const;
type Form = keyof typeof FORMS;
const FORM_NAMES = Object.keys(FORMS) as Form[];

/** The document's value texts in its order, joined by U+001F: EVENT_JSON without the member names. */
const VALUES_TEXT = `concat_ws(chr(31), '"' || e.event_id || '"',
  '"' || to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', '"' || e.action || '"', to_json(e.user_id)::text,
  to_json(e.user_role)::text, to_json(e.resource_type)::text, to_json(e.resource_id)::text, to_json(e.fields_accessed)::text,
  CASE WHEN e.phi_involved THEN 'true' ELSE 'false' END, '"' || e.tenant_id || '"', '"' || e.source_ip || '"', to_json(e.user_agent)::text,
  to_json(e.justification)::text, CASE WHEN e.success THEN 'true' ELSE 'false' END, to_json(e.details)::text)`;
const MEMBER_KEYS = Object.keys(AUDIT_EVENT_FIELDS).map((name, index) => `${index === 0 ? '{' : ','}"${name}":`);
/** The document from its value texts: the names put back between them. */
function documentFromValues(text: string): string {
  const values = text.split('\x1f');
  let document = '';
  for (let index = 0; index < MEMBER_KEYS.length; index += 1) document += MEMBER_KEYS[index]! + values[index]!;
  return `${document}}`;
}
/** The value texts of a rendered document (the write side), by the same rule. */
function valuesOfDocument(document: string): string {
  let text = document.slice(MEMBER_KEYS[0]!.length, -1);
  for (let index = 1; index < MEMBER_KEYS.length; index += 1) text = text.replace(MEMBER_KEYS[index]!, '\x1f');
  return text;
}

const admin = new pg.Client({ connectionString: `${SERVER_URL}/postgres` });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${DATABASE}`);
const db = new pg.Client({ connectionString: `${SERVER_URL}/${DATABASE}` });
await db.connect();
const log = (line: string) => console.error(line);

try {
  for (const form of FORM_NAMES) {
    await db.query(`CREATE TABLE ${form} (${FORMS[form]}, PRIMARY KEY (tenant_id, occurred_at, event_id))`);
    await db.query(`CREATE INDEX ON ${form} (event_id)`);
    for (const column of ['action', 'resource_type', 'phi_involved', 'user_id', 'resource_id']) {
      await db.query(`CREATE INDEX ON ${form} (tenant_id, ${column}, occurred_at, event_id)`);
    }
  }

  // The same events in every table, generated once like the list benchmark's dataset, and stored in time
  // order, as ingestion stores them (the order shapes the indexes: a tenant's entries grow at many places).
  log(`generating ${EVENTS} events`);
  await db.query(`CREATE UNLOGGED TABLE generated AS
    SELECT tenant AS tenant_id, at AS occurred_at, gen_random_uuid() AS event_id, action,
           'user-' || (n % 5000) AS user_id, (ARRAY['clinician','billing','admin','support'])[1 + n % 4] AS user_role,
           resource AS resource_type, resource || '-' || (n % 100000) AS resource_id,
           CASE WHEN action LIKE 'phi.%' THEN '["diagnosis","medications"]' ELSE '' END AS fields_accessed,
           action LIKE 'phi.%' AS phi_involved, '10.' || (n % 250) || '.' || (n % 200) || '.1' AS source_ip,
           'bench-agent/1.0' AS user_agent, '' AS justification, n % 50 <> 0 AS success, '{"ward":"' || (n % 40) || '"}' AS details
      FROM (SELECT n, 'tenant-' || lpad((n % ${TENANTS})::text, 4, '0') AS tenant,
                   date_trunc('milliseconds', now() - (random() * interval '90 days')) AS at,
                   (ARRAY['phi.read','phi.read','phi.read','phi.query','phi.export','auth.login','auth.logout','admin.user.invite','admin.key.create','record.update'])[1 + (n / 7) % 10] AS action,
                   (ARRAY['patient_record','claim','upload','session','user'])[1 + (n / 3) % 5] AS resource
              FROM generate_series(1, ${EVENTS}) AS n) AS g`);
  const fieldList =
    'tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id, fields_accessed, phi_involved, source_ip, user_agent, justification, success, details';
  const keyList = 'tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved';
  // The leaf hash's bytes do not matter to the sizes: 32 random-looking bytes, as SHA-256 gives.
  const hash = `sha256(e.event_id::text::bytea)`;
  await db.query(`INSERT INTO reference SELECT ${fieldList} FROM generated ORDER BY occurred_at`);
  await db.query(
    `INSERT INTO today (${fieldList}, document, leaf_hash) SELECT ${fieldList}, ${EVENT_JSON}, ${hash} FROM generated e ORDER BY occurred_at`,
  );
  await db.query(
    `INSERT INTO document (${keyList}, document, leaf_hash) SELECT ${keyList}, ${EVENT_JSON}, ${hash} FROM generated e ORDER BY occurred_at`,
  );
  await db.query(`INSERT INTO columns (${fieldList}, leaf_hash) SELECT ${fieldList}, ${hash} FROM generated e ORDER BY occurred_at`);
  await db.query(
    `INSERT INTO values (${keyList}, document_values, leaf_hash) SELECT ${keyList}, ${VALUES_TEXT}, ${hash} FROM generated e ORDER BY occurred_at`,
  );
  await db.query('DROP TABLE generated');
  // Every form serves the same bytes: checked on a sample before anything is timed.
  const { rows: sample } = await db.query(
    `SELECT t.document, v.document_values, ${EVENT_JSON} AS rendered FROM today t JOIN values v USING (tenant_id, occurred_at, event_id)
       JOIN columns e USING (tenant_id, occurred_at, event_id) LIMIT 2000`,
  );
  for (const row of sample) {
    if (documentFromValues(row.document_values) !== row.document || row.rendered !== row.document)
      throw new Error(`forms differ: ${row.document}`);
    if (valuesOfDocument(row.document) !== row.document_values) throw new Error(`value texts differ: ${row.document}`);
  }
  await db.query('VACUUM ANALYZE');

  const bytes: Record<string, unknown> = {};
  for (const form of FORM_NAMES) {
    const { rows } = await db.query(
      `SELECT pg_relation_size($1::regclass) AS heap, pg_total_relation_size($1::regclass) - pg_relation_size($1::regclass) - pg_indexes_size($1::regclass) AS toast,
              pg_indexes_size($1::regclass) AS indexes, pg_total_relation_size($1::regclass) AS total`,
      [form],
    );
    const perEvent = (value: string) => Number((Number(value) / EVENTS).toFixed(1));
    bytes[form] = {
      heap: perEvent(rows[0].heap),
      toast: perEvent(rows[0].toast),
      indexes: perEvent(rows[0].indexes),
      total: perEvent(rows[0].total),
    };
  }
  const totalOf = (form: Form) => (bytes[form] as { total: number }).total;
  log('sizes measured; writing');

  // Writes: batches as the write path sends them, interleaved form by form so that noise hits all alike.
  const producer = (index: number): NewEvent => producerNewEvent(`tenant-${String(index % TENANTS).padStart(4, '0')}`, index);
  const unnestFields = `unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
      $9::text[], $10::boolean[], $11::text[], $12::text[], $13::text[], $14::boolean[], string_to_array($15, E'\\n'))`;
  const statements: Record<Form, string> = {
    today: '',
    document: '',
    values: '',
    reference: `INSERT INTO reference SELECT * FROM ${unnestFields} ON CONFLICT DO NOTHING`,
    columns: `INSERT INTO columns (${fieldList}, leaf_hash)
      SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.user_role, u.resource_type, u.resource_id, u.fields_accessed,
             u.phi_involved, u.source_ip, u.user_agent, u.justification, u.success, u.details, substring($16::bytea FROM u.position::int * 32 - 31 FOR 32)
        FROM ${unnestFields} WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, position)
      ON CONFLICT DO NOTHING`,
  };
  // Today's statement (events/eventStore.ts INSERT_EVENTS) on its table: every column and the document.
  statements.today = `INSERT INTO today (${fieldList}, document, leaf_hash)
      SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.user_role, u.resource_type, u.resource_id, u.fields_accessed,
             u.phi_involved, u.source_ip, u.user_agent, u.justification, u.success, u.details, u.document,
             substring($17::bytea FROM u.position::int * 32 - 31 FOR 32)
        FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
             $9::text[], $10::boolean[], $11::text[], $12::text[], $13::text[], $14::boolean[], string_to_array($15, E'\\n'),
             string_to_array($16, E'\\n'))
             WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, user_role, resource_type, resource_id,
             fields_accessed, phi_involved, source_ip, user_agent, justification, success, details, document, position)
      ON CONFLICT DO NOTHING`;
  statements.document = `INSERT INTO document (${keyList}, document, leaf_hash)
      SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.resource_type, u.resource_id, u.phi_involved, u.document,
             substring($10::bytea FROM u.position::int * 32 - 31 FOR 32)
        FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
             string_to_array($9, E'\\n'))
             WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved, document, position)
      ON CONFLICT DO NOTHING`;
  statements.values = `INSERT INTO values (${keyList}, document_values, leaf_hash)
      SELECT u.tenant_id, u.occurred_at, u.event_id, u.action, u.user_id, u.resource_type, u.resource_id, u.phi_involved, u.document_values,
             substring($10::bytea FROM u.position::int * 32 - 31 FOR 32)
        FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
             string_to_array($9, E'\\n'))
             WITH ORDINALITY AS u(tenant_id, occurred_at, event_id, action, user_id, resource_type, resource_id, phi_involved, document_values, position)
      ON CONFLICT DO NOTHING`;
  const parameters = (events: NewEvent[], form: Form): unknown[] => {
    const timestamps = events.map((event) => new Date(event.occurredAtMs).toISOString());
    const rendered = events.map((event, index) => renderEvent(event, timestamps[index]!));
    const hashes = Buffer.from(rendered.map(({ leafHash }) => leafHash).join(''), 'hex');
    const text = (value: (event: NewEvent) => string) => textArrayLiteral(events.map(value));
    if (form === 'document' || form === 'values') {
      return [
        text((e) => e.tenantId),
        textArrayLiteral(timestamps),
        text((e) => e.eventId),
        text((e) => e.action),
        text((e) => e.userId),
        text((e) => e.resourceType),
        text((e) => e.resourceId),
        booleanArrayLiteral(events.map((e) => e.phiInvolved)),
        lineSeparatedList(rendered.map(({ document }) => (form === 'values' ? valuesOfDocument(document) : document))),
        hashes,
      ];
    }
    const fields = [
      text((e) => e.tenantId),
      textArrayLiteral(timestamps),
      text((e) => e.eventId),
      text((e) => e.action),
      text((e) => e.userId),
      text((e) => e.userRole),
      text((e) => e.resourceType),
      text((e) => e.resourceId),
      text((e) => e.fieldsAccessed),
      booleanArrayLiteral(events.map((e) => e.phiInvolved)),
      text((e) => e.sourceIp),
      text((e) => e.userAgent),
      text((e) => e.justification),
      booleanArrayLiteral(events.map((e) => e.success)),
      lineSeparatedList(events.map((e) => e.details)),
    ];
    if (form === 'reference') return fields;
    if (form === 'today') return [...fields, lineSeparatedList(rendered.map(({ document }) => document)), hashes];
    return [...fields, hashes];
  };
  const writeMs: Record<Form, number> = { reference: 0, today: 0, document: 0, columns: 0, values: 0 };
  let index = 0;
  for (let batch = 0; batch < WRITE_BATCHES; batch += 1) {
    for (const form of FORM_NAMES) {
      const values = parameters(
        Array.from({ length: BATCH }, () => producer(index++)),
        form,
      );
      const started = performance.now();
      await db.query({ name: `write-${form}`, text: statements[form], values });
      writeMs[form] += performance.now() - started;
    }
  }
  const writeUs = Object.fromEntries(
    FORM_NAMES.map((form) => [form, Number(((writeMs[form] * 1000) / (WRITE_BATCHES * BATCH)).toFixed(1))]),
  );
  log('writes measured; reading');

  // Reads: a first page of 101 rows of a random tenant, in list order.
  const page = (table: string, select: string) =>
    `SELECT ${select} FROM ${table} e WHERE e.tenant_id = $1 ORDER BY e.occurred_at DESC, e.event_id DESC LIMIT 101`;
  const rawText = { getTypeParser: () => (value: string) => value };
  const columnsSelect = `e.event_id, (extract(epoch FROM e.occurred_at) * 1000)::int8, e.action, e.user_id, e.user_role, e.resource_type,
    e.resource_id, e.fields_accessed, e.phi_involved, e.tenant_id, e.source_ip, e.user_agent, e.justification, e.success, e.details`;
  const renderRow = (row: string[]) => {
    const timestamp = new Date(Number(row[1])).toISOString();
    return renderEventDocument(
      {
        eventId: row[0]!,
        occurredAtMs: 0,
        action: row[2]!,
        userId: row[3]!,
        userRole: row[4]!,
        resourceType: row[5]!,
        resourceId: row[6]!,
        fieldsAccessed: row[7]!,
        phiInvolved: row[8] === 't',
        tenantId: row[9]!,
        sourceIp: row[10]!,
        userAgent: row[11]!,
        justification: row[12]!,
        success: row[13] === 't',
        details: row[14]!,
      },
      timestamp,
    );
  };
  const reads = {
    both_stored_document: async (tenant: string) => {
      const { rows } = await db.query({
        name: 'read-today',
        text: page('today', `COALESCE(e.document, ${EVENT_JSON})`),
        values: [tenant],
        rowMode: 'array',
      });
      return rows.length;
    },
    document_stored: async (tenant: string) => {
      const { rows } = await db.query({ name: 'read-document', text: page('document', 'e.document'), values: [tenant], rowMode: 'array' });
      return rows.length;
    },
    values_names_put_back_by_node: async (tenant: string) => {
      const { rows } = await db.query({
        name: 'read-values',
        text: page('values', 'e.document_values'),
        values: [tenant],
        rowMode: 'array',
      });
      let length = 0;
      for (const row of rows as string[][]) length += documentFromValues(row[0]!).length;
      return length > 0 ? rows.length : 0;
    },
    columns_rendered_by_postgres: async (tenant: string) => {
      const { rows } = await db.query({ name: 'read-columns-sql', text: page('columns', EVENT_JSON), values: [tenant], rowMode: 'array' });
      return rows.length;
    },
    columns_rendered_by_node: async (tenant: string) => {
      const { rows } = await db.query({
        name: 'read-columns-node',
        text: page('columns', columnsSelect),
        values: [tenant],
        rowMode: 'array',
        types: rawText,
      });
      let length = 0;
      for (const row of rows as string[][]) length += renderRow(row).length;
      return length > 0 ? rows.length : 0;
    },
  };
  const readUs: Record<string, number> = {};
  for (const name of Object.keys(reads)) readUs[name] = 0;
  for (let round = 0; round < 3; round += 1) {
    for (const [name, read] of Object.entries(reads)) {
      const started = performance.now();
      for (let n = 0; n < PAGES / 3; n += 1) await read(`tenant-${String(Math.floor(Math.random() * TENANTS)).padStart(4, '0')}`);
      readUs[name] = (readUs[name] ?? 0) + ((performance.now() - started) * 1000) / PAGES;
    }
  }

  console.log(
    JSON.stringify(
      {
        benchmark: 'stored-form',
        command: 'node bench/storedForm.ts',
        events: EVENTS,
        tenants: TENANTS,
        bytes_per_event: bytes,
        bytes_ratio_vs_reference: Object.fromEntries(
          FORM_NAMES.map((form) => [form, Number((totalOf(form) / totalOf('reference')).toFixed(2))]),
        ),
        write_us_per_event_one_session: writeUs,
        write_ratio_vs_reference: Object.fromEntries(
          FORM_NAMES.map((form) => [form, Number((writeUs[form]! / writeUs.reference!).toFixed(2))]),
        ),
        read_us_per_page_of_101_one_session: Object.fromEntries(Object.entries(readUs).map(([name, us]) => [name, Math.round(us)])),
      },
      null,
      2,
    ),
  );
} finally {
  await db.end();
  await admin.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`);
  await admin.end();
}
