import pg from 'pg';
import type { Database, Queryable } from '../db/database.ts';
import { type Clock, systemClock } from '../platform/clock.ts';
import { sleep } from '../platform/sleep.ts';
import { EVENT_VALUES } from './eventDocument.ts';
import { STORED_FORM_REFRESH_MS, switchToCompactForm } from './storedFormSetting.ts';

/**
 * `audit-trail events compact` (docs/operations.md "How events are stored"): rewrites the events a database
 * stored in the full form (every field as a column and the document) into the compact one (migration 026),
 * online. Each month's partition is walked in primary-key order in batches of one short transaction each,
 * through the one UPDATE the table allows for it (the session names itself compacting, and the row guard
 * refuses any change of the served bytes); the position after each batch is recorded with it
 * (event_compaction_progress), so a run stopped anywhere resumes where it stopped. Ingest and reads go on
 * throughout: a batch locks only its own rows, for milliseconds.
 */

/** What one batch did, for progress lines. */
export interface CompactionBatch {
  readonly partition: string;
  /** Rows rewritten to the compact form in this partition so far. */
  readonly compacted: number;
  /** Rows whose stored document stays (a redacted event, a later version): only their columns were emptied. */
  readonly kept: number;
  /** Postgres' estimate of the partition's rows. */
  readonly estimatedRows: number;
  readonly finished: boolean;
}

export interface CompactionOptions {
  readonly batchSize: number;
  readonly onBatch?: (batch: CompactionBatch) => void;
  /** Called when the database was switched to the compact form and the run waits for writers to follow. */
  readonly onSwitch?: (waitMs: number) => void;
  readonly clock?: Clock;
}

export interface CompactionSummary {
  readonly partitions: number;
  readonly compacted: number;
  readonly kept: number;
}

/** The margin beyond a writer's refresh of the form it stores before rows are rewritten. */
const SWITCH_MARGIN_MS = 2_000;

/**
 * Switches writers to the compact form, waits until they all follow, then compacts every partition not
 * finished by an earlier run, oldest first.
 */
export async function compactEvents(db: Database, options: CompactionOptions): Promise<CompactionSummary> {
  const clock = options.clock ?? systemClock;
  if (await switchToCompactForm(db)) {
    const waitMs = STORED_FORM_REFRESH_MS + SWITCH_MARGIN_MS;
    options.onSwitch?.(waitMs);
    await sleep(waitMs, { clock });
  }
  let compacted = 0;
  let kept = 0;
  const partitions = await unfinishedPartitions(db);
  for (const partition of partitions) {
    const done = await compactPartition(db, partition, options);
    compacted += done.compacted;
    kept += done.kept;
  }
  return { partitions: partitions.length, compacted, kept };
}

async function unfinishedPartitions(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ partition: string }>(
    `SELECT c.relname AS partition
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'events'::regclass
        AND NOT EXISTS (SELECT 1 FROM event_compaction_progress p WHERE p.partition = c.relname AND p.finished_at IS NOT NULL)
      ORDER BY c.relname`,
  );
  return rows.map((row) => row.partition);
}

interface Position {
  readonly tenantId: string;
  readonly occurredAt: string;
  readonly eventId: string;
}

async function compactPartition(db: Database, partition: string, options: CompactionOptions): Promise<{ compacted: number; kept: number }> {
  const table = pg.escapeIdentifier(partition);
  const { rows } = await db.query<{
    after_tenant_id: string | null;
    after_occurred: string | null;
    after_event_id: string | null;
    compacted: string;
    kept: string;
    estimate: number;
  }>(
    `INSERT INTO event_compaction_progress (partition) VALUES ($1) ON CONFLICT (partition) DO UPDATE SET partition = EXCLUDED.partition
     RETURNING after_tenant_id, after_occurred::text, after_event_id::text, compacted, kept,
               (SELECT greatest(reltuples, 0)::int8 FROM pg_class WHERE relname = $1) AS estimate`,
    [partition],
  );
  const progress = rows[0]!;
  let after: Position | undefined =
    progress.after_tenant_id === null
      ? undefined
      : { tenantId: progress.after_tenant_id, occurredAt: progress.after_occurred!, eventId: progress.after_event_id! };
  let compacted = Number(progress.compacted);
  let kept = Number(progress.kept);
  let done = { compacted: 0, kept: 0 };
  for (;;) {
    const batch = await db.transaction((client) => compactBatch(client, table, partition, after, options.batchSize));
    compacted += batch.compacted;
    kept += batch.kept;
    done = { compacted: done.compacted + batch.compacted, kept: done.kept + batch.kept };
    after = batch.last;
    options.onBatch?.({ partition, compacted, kept, estimatedRows: Number(progress.estimate), finished: batch.last === undefined });
    if (batch.last === undefined) break;
  }
  // The old row versions are dead now: vacuum makes their space reusable (it takes no lock that blocks
  // reads or writes). The file keeps its size; docs/operations.md says how to return it.
  await db.query(`VACUUM (ANALYZE) ${table}`);
  return done;
}

/**
 * One batch: the next `size` rows of the partition after `after` in key order; those stored with a document
 * become compact where their columns render it byte for byte (EVENT_VALUES), and otherwise keep the document
 * and lose only their columns. `last` is the batch's last key, undefined once the partition is done (and
 * recorded as finished).
 */
async function compactBatch(
  client: Queryable,
  table: string,
  partition: string,
  after: Position | undefined,
  size: number,
): Promise<{ compacted: number; kept: number; last: Position | undefined }> {
  await client.query(`SELECT set_config('audit_trail.compacting', 'on', true)`);
  const keyAfter = after ? '(e.tenant_id, e.occurred_at, e.event_id) > ($1, $2::timestamptz, $3::uuid)' : '$1::text IS NULL';
  const bound = after ? [after.tenantId, after.occurredAt, after.eventId] : [null];
  const { rows: ends } = await client.query<{ tenant_id: string; occurred_at: string; event_id: string }>(
    `SELECT e.tenant_id, e.occurred_at::text, e.event_id::text FROM ${table} e WHERE ${keyAfter}
      ORDER BY e.tenant_id, e.occurred_at, e.event_id OFFSET $${bound.length + 1} LIMIT 1`,
    [...bound, size - 1],
  );
  const end = ends[0];
  const upTo = end
    ? `AND (e.tenant_id, e.occurred_at, e.event_id) <= ($${bound.length + 1}, $${bound.length + 2}::timestamptz, $${bound.length + 3}::uuid)`
    : '';
  const { rows } = await client.query<{ compact: boolean }>(
    `WITH candidates AS (
       SELECT e.tenant_id, e.occurred_at, e.event_id, v.values, audit_event_document(NULL, v.values, e.event_id, e.action, e.phi_involved, e.tenant_id) = e.document AS compact
         FROM ${table} e CROSS JOIN LATERAL (SELECT ${EVENT_VALUES} AS values) v
        WHERE ${keyAfter} ${upTo} AND e.document IS NOT NULL
     )
     UPDATE ${table} e
        SET document_values = CASE WHEN c.compact THEN c.values END,
            document = CASE WHEN c.compact THEN NULL ELSE e.document END,
            user_role = NULL, fields_accessed = NULL, source_ip = NULL, user_agent = NULL, justification = NULL, success = NULL, details = NULL
       FROM candidates c
      WHERE e.tenant_id = c.tenant_id AND e.occurred_at = c.occurred_at AND e.event_id = c.event_id
     RETURNING c.compact`,
    end ? [...bound, end.tenant_id, end.occurred_at, end.event_id] : bound,
  );
  const compacted = rows.filter((row) => row.compact).length;
  const kept = rows.length - compacted;
  await client.query(
    `UPDATE event_compaction_progress
        SET after_tenant_id = $2, after_occurred = $3::timestamptz, after_event_id = $4::uuid,
            compacted = compacted + $5, kept = kept + $6, updated_at = now(),
            finished_at = CASE WHEN $7 THEN now() END
      WHERE partition = $1`,
    [
      partition,
      end?.tenant_id ?? after?.tenantId ?? null,
      end?.occurred_at ?? after?.occurredAt ?? null,
      end?.event_id ?? after?.eventId ?? null,
      compacted,
      kept,
      end === undefined,
    ],
  );
  return { compacted, kept, last: end ? { tenantId: end.tenant_id, occurredAt: end.occurred_at, eventId: end.event_id } : undefined };
}
