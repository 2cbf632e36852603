import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { INSERT_EVENTS } from '../../src/events/eventInsert.ts';
import type { FanOutPublisher } from '../../src/events/storeBatch.ts';
import type { StoredForm } from '../../src/events/storedFormSetting.ts';

/**
 * The databases bench/writeCost.ts writes to, each the migrated schema as a compact writer finds it
 * (`service`) or with one part changed, and the comparisons that price each part from two of them.
 */

/** The write statement as BatchStatements builds it (events/storeBatch.ts). */
const writeStatement = (form: StoredForm, publisher: FanOutPublisher) =>
  `WITH stored AS (${INSERT_EVENTS[form]}), ${WEBHOOK_FAN_OUT.clauses('stored', '$1::text[]', publisher)}
  SELECT tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms, ${WEBHOOK_FAN_OUT.selected(publisher)}
  FROM stored`;
const WITHOUT_FAN_OUT = `WITH stored AS (${INSERT_EVENTS.compact})
  SELECT tenant_id, event_id, (extract(epoch FROM occurred_at) * 1000)::int8 AS occurred_at_ms FROM stored`;

export interface Setup {
  /** Run once on the copy of the template before it is written to. */
  readonly ddl?: string;
  readonly statement: string;
  /** The form the parameters are built for (eventColumnArrays). */
  readonly form: StoredForm;
  /** Changes the statement's parameters before they are sent. */
  readonly parameters?: (values: Array<string | Buffer>) => Array<string | Buffer>;
  /** Confirms the deliveries each write returns, as the writer's publisher does once JetStream acknowledges them. */
  readonly confirmsPublications?: boolean;
}

const SERVICE: Setup = { statement: writeStatement('compact', 'writer'), form: 'compact' };
const dropIndex = (name: string): Setup => ({ ...SERVICE, ddl: `DROP INDEX ${name}` });
// One active endpoint per tenant of the template (tenant-0 … tenant-99), its filter [] matching every event.
const ENDPOINTS = `INSERT INTO webhook_endpoints (id, tenant_id, url, secret_ciphertext)
  SELECT 'wh_' || md5(n::text), 'tenant-' || n, 'https://receiver.invalid/hook', '\\x00'::bytea FROM generate_series(0, 99) AS n`;

export const SETUPS = {
  service: SERVICE,
  'no events_pkey': { ...SERVICE, ddl: 'ALTER TABLE events DROP CONSTRAINT events_pkey' },
  'no events_event_id': dropIndex('events_event_id'),
  'no events_by_action': dropIndex('events_by_action'),
  'no events_by_resource_type': dropIndex('events_by_resource_type'),
  'no events_by_phi': dropIndex('events_by_phi'),
  'no events_by_user': dropIndex('events_by_user'),
  'no events_by_resource': dropIndex('events_by_resource'),
  'no sealing trigger': { ...SERVICE, ddl: 'DROP TRIGGER events_enqueue_for_sealing ON events' },
  'no fan-out clauses': { ...SERVICE, statement: WITHOUT_FAN_OUT },
  // An empty list: unnest pads it with NULL, so no row stores document values.
  'no document values': { ...SERVICE, parameters: (values) => values.map((value, index) => (index === 8 ? '' : value)) },
  // An empty bytea: each row stores an empty leaf hash instead of 32 bytes.
  'no leaf hash': { ...SERVICE, parameters: (values) => values.map((value, index) => (index === 9 ? Buffer.alloc(0) : value)) },
  // The form of releases before migration 026: every field as a column and the rendered document.
  'full form': { statement: writeStatement('full', 'writer'), form: 'full' },
  'endpoints (writer publishes)': { ...SERVICE, ddl: ENDPOINTS, confirmsPublications: true },
  'endpoints (relays publish)': { ddl: ENDPOINTS, statement: writeStatement('compact', 'relay'), form: 'compact' },
} satisfies Record<string, Setup>;

export type SetupName = keyof typeof SETUPS;

/** A part's price: Postgres CPU per event of `with` less that of `without`, both measured in the same rounds. */
export interface Comparison {
  readonly part: string;
  readonly with: SetupName;
  readonly without: SetupName;
}

const part = (name: string, without: SetupName): Comparison => ({ part: name, with: 'service', without });

export const COMPARISONS: readonly Comparison[] = [
  part('primary key (tenant_id, occurred_at, event_id)', 'no events_pkey'),
  part('index events_event_id', 'no events_event_id'),
  part('index events_by_action', 'no events_by_action'),
  part('index events_by_resource_type', 'no events_by_resource_type'),
  part('index events_by_phi', 'no events_by_phi'),
  part('index events_by_user', 'no events_by_user'),
  part('index events_by_resource', 'no events_by_resource'),
  part('sealing trigger (its seal_queue insert)', 'no sealing trigger'),
  part('fan-out clauses, no endpoint', 'no fan-out clauses'),
  part('document values', 'no document values'),
  part('leaf hash', 'no leaf hash'),
  { part: 'full form instead of compact (each event twice)', with: 'full form', without: 'service' },
  { part: 'one delivery per event (an endpoint per tenant), writer publishes', with: 'endpoints (writer publishes)', without: 'service' },
  {
    part: 'relays publish instead of the writer (deliveries due, wake-up NOTIFY)',
    with: 'endpoints (relays publish)',
    without: 'endpoints (writer publishes)',
  },
];
