import { expect } from 'chai';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * "Past one primary" (docs/operations.md): the plan is Citus, distributing every tenant's rows by tenant_id
 * and co-locating them, with the deployment-wide tables as reference tables. Citus requires of a distributed
 * table that its primary key and unique keys contain the distribution column, and of a foreign key between
 * two distributed tables that it includes it; leading with tenant_id is also what keeps a tenant's rows
 * together in each index. This reads the real catalog of a migrated database and holds the schema to that,
 * with every exception of today named here and in docs/operations.md, with its reason: a new table must
 * follow the rule or be added to a list on purpose, and a fixed exception must leave it.
 */

/** Tables of the deployment, not of a tenant: reference tables under Citus (copied to every node). */
const GLOBAL_TABLES = new Set([
  'audit_deployment', // one row: the deployment id
  'audit_schema_migrations', // the migrator's bookkeeping
  'event_storage', // one row: how events are stored
  'event_compaction_progress', // per partition, across tenants
  'seal_keys', // the sealer's signing keys, one set for all tenants
  'log_streams', // a stream may follow several tenants or all (owner_tenant_id, tenant_ids)
  'durability_mark', // one row, locked by writes that stored nothing new (src/events/durableRepeats.ts)
]);

/**
 * Tenant tables whose primary key or foreign keys do not lead with tenant_id today, and why; each needs a
 * migration (tenant_id added to the key, or a reference kept another way) before it can be distributed.
 */
const EXCEPTIONS: Record<string, string> = {
  api_keys: 'primary key lookup_id: a key is found by its lookup segment before its tenant is known (a reference table)',
  deliveries: 'primary key id (bigint): the outbox and the worker address deliveries by id alone',
  delivery_attempts: "no tenant_id: a delivery's attempts, keyed by delivery id",
  event_redactions: 'primary key id',
  expiry_batches: 'primary key id',
  legal_holds: 'primary key id: holds are named by id in the API and the LegalHold resource',
  log_stream_positions: 'primary key (stream_id, tenant_id) and a foreign key to log_streams, a deployment-wide table',
  portal_sessions: 'primary key id, and a foreign key to api_keys (minted_by)',
  webhook_endpoints: 'primary key id: endpoints are addressed as wh_… in the API, without the tenant',
  webhook_operational_events: 'primary key id',
  webhook_replays: 'primary key id: replays are addressed as rpl_… in the API',
};

interface TableShape {
  name: string;
  hasTenantId: boolean;
  primaryKey: string[] | null;
  foreignKeys: { columns: string[]; references: string }[];
}

describe('the schema, for distribution by tenant_id (Citus)', () => {
  let db: TestDatabase;
  let tables: TableShape[];

  before(async () => {
    db = await createTestDatabase();
    const { rows } = await db.pool.query<TableShape>(`
      WITH keys AS (
        SELECT con.conrelid, con.contype, con.confrelid, array_agg(a.attname::text ORDER BY k.ord) AS columns
          FROM pg_constraint con
          CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
         WHERE con.contype IN ('p', 'f')
         GROUP BY con.oid, con.conrelid, con.contype, con.confrelid)
      SELECT c.relname AS name,
             EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = c.oid AND attname = 'tenant_id' AND NOT attisdropped) AS "hasTenantId",
             (SELECT columns FROM keys WHERE conrelid = c.oid AND contype = 'p') AS "primaryKey",
             COALESCE((SELECT json_agg(json_build_object('columns', columns, 'references', confrelid::regclass::text))
                         FROM keys WHERE conrelid = c.oid AND contype = 'f'), '[]') AS "foreignKeys"
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       ORDER BY c.relname`);
    tables = rows;
  });

  after(() => db?.drop());

  const leadsWithTenant = (columns: string[] | null) => columns !== null && columns[0] === 'tenant_id';
  const followsTheRule = (table: TableShape) =>
    table.hasTenantId &&
    leadsWithTenant(table.primaryKey) &&
    table.foreignKeys.every((key) => GLOBAL_TABLES.has(key.references) || leadsWithTenant(key.columns));

  it('leads the primary key and the foreign keys of every tenant table with tenant_id, but for the named exceptions', () => {
    const tenantTables = tables.filter((table) => !GLOBAL_TABLES.has(table.name));
    const breaking = tenantTables.filter((table) => !followsTheRule(table)).map((table) => table.name);
    expect(breaking).to.deep.equal(Object.keys(EXCEPTIONS).sort());
    // The rule holds for the trail itself: events, its Merkle tree and heads, expiry and retention.
    for (const name of [
      'events',
      'merkle_trees',
      'merkle_tiles',
      'merkle_leaf_ranges',
      'tree_heads',
      'seal_queue',
      'expired_events',
      'retention_policies',
    ]) {
      expect(followsTheRule(tenantTables.find((table) => table.name === name)!), name).to.equal(true);
    }
  });

  it('names as global only tables that exist and carry no tenant_id', () => {
    for (const name of GLOBAL_TABLES) {
      const table = tables.find((candidate) => candidate.name === name);
      expect(table, name).to.not.equal(undefined);
      expect(table!.hasTenantId, name).to.equal(false);
    }
  });
});
