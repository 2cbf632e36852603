import { prepared, type Queryable } from '../db/database.ts';
import { NOTIFY_REPLAY_CREATED, wakeRelaysIfAny } from './relayWakeUp.ts';
import { EVENT_DOCUMENT } from '../events/eventStore.ts';
import { eventFilterMatches, payloadFilterMatches, shareEndpointForFanOut } from '../webhooks/endpointDeliveryStore.ts';

/**
 * SQL of webhook replays (docs/webhooks.md "Replay"): the replays table, and the chunk statement that
 * creates a range's deliveries and moves the replay's position past them in one transaction.
 */

type ReplayStatus = 'running' | 'completed' | 'cancelled';

export interface Replay {
  readonly id: string;
  readonly endpointId: string;
  readonly tenantId: string;
  readonly since: Date;
  readonly until: Date;
  readonly onlyUndelivered: boolean;
  readonly status: ReplayStatus;
  readonly eventsMatched: number;
  readonly deliveriesCreated: number;
  readonly createdAt: Date;
  readonly completedAt: Date | null;
}

interface ReplayRow {
  id: string;
  endpoint_id: string;
  tenant_id: string;
  since: Date;
  until: Date;
  only_undelivered: boolean;
  status: ReplayStatus;
  events_matched: string;
  deliveries_created: string;
  created_at: Date;
  completed_at: Date | null;
  [column: string]: unknown;
}

const COLUMNS =
  'id, endpoint_id, tenant_id, since, until, only_undelivered, status, events_matched, deliveries_created, created_at, completed_at';

function toReplay(row: ReplayRow): Replay {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    tenantId: row.tenant_id,
    since: row.since,
    until: row.until,
    onlyUndelivered: row.only_undelivered,
    status: row.status,
    eventsMatched: Number(row.events_matched),
    deliveriesCreated: Number(row.deliveries_created),
    createdAt: row.created_at,
    completedAt: row.completed_at,
  };
}

export interface NewReplay {
  readonly id: string;
  readonly endpointId: string;
  readonly tenantId: string;
  readonly sinceMs: number;
  readonly untilMs: number;
  readonly onlyUndelivered: boolean;
}

/** The endpoint's running replay, if any. Run after the endpoint's row lock, so two starts cannot both miss each other. */
export async function findRunningReplay(db: Queryable, endpointId: string): Promise<Replay | undefined> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM webhook_replays WHERE endpoint_id = $1 AND status = 'running'`, [
    endpointId,
  ]);
  return rows[0] ? toReplay(rows[0]) : undefined;
}

export async function insertReplay(db: Queryable, replay: NewReplay): Promise<Replay> {
  const { rows } = await db.query<ReplayRow>(
    // The relays hear of it when it commits, and start it then (relayWakeUp.ts).
    `WITH inserted AS (
       INSERT INTO webhook_replays (id, endpoint_id, tenant_id, since, until, only_undelivered)
       VALUES ($1, $2, $3, $4::timestamptz, $5::timestamptz, $6)
       RETURNING ${COLUMNS}
     )
     SELECT inserted.*, ${NOTIFY_REPLAY_CREATED} AS notified FROM inserted`,
    [
      replay.id,
      replay.endpointId,
      replay.tenantId,
      new Date(replay.sinceMs).toISOString(),
      new Date(replay.untilMs).toISOString(),
      replay.onlyUndelivered,
    ],
  );
  return toReplay(rows[0]!);
}

/** One of the endpoint's replays, or undefined. */
export async function findReplay(db: Queryable, endpointId: string, replayId: string): Promise<Replay | undefined> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM webhook_replays WHERE id = $1 AND endpoint_id = $2`, [
    replayId,
    endpointId,
  ]);
  return rows[0] ? toReplay(rows[0]) : undefined;
}

/** Running replays, oldest first: what replaying processes look for. Reads the small partial index. */
export async function runningReplayIds(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    prepared(`SELECT id FROM webhook_replays WHERE status = 'running' ORDER BY created_at, id`, []),
  );
  return rows.map((row) => row.id);
}

/** The endpoint of the replay while it runs; undefined once it has finished or been cancelled. */
export async function runningReplayEndpoint(db: Queryable, replayId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ endpoint_id: string }>(`SELECT endpoint_id FROM webhook_replays WHERE id = $1 AND status = 'running'`, [
    replayId,
  ]);
  return rows[0]?.endpoint_id;
}

/**
 * Takes the replay for this session: a session-level advisory lock, held by the connection that runs it.
 * A process that dies loses its connection and with it the lock, so another one takes the replay over at
 * once, with no lease to wait out; two processes never run one replay.
 */
export async function tryClaimReplay(session: Queryable, replayId: string): Promise<boolean> {
  const { rows } = await session.query<{ claimed: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1::text, 7302)) AS claimed', [
    replayId,
  ]);
  return rows[0]!.claimed;
}

export async function releaseReplay(session: Queryable, replayId: string): Promise<void> {
  await session.query('SELECT pg_advisory_unlock(hashtextextended($1::text, 7302))', [replayId]);
}

/** Deliveries of the endpoint still to be made (pending, parked or queued), counted up to `cap` (ranges of deliveries_log). */
export async function pendingDeliveries(db: Queryable, endpointId: string, cap: number): Promise<number> {
  const { rows } = await db.query<{ pending: number }>(
    prepared(
      `SELECT count(*)::int AS pending FROM (SELECT 1 FROM deliveries WHERE endpoint_id = $1 AND state IN ('pending', 'parked', 'queued') LIMIT $2) p`,
      [endpointId, cap],
    ),
  );
  return rows[0]!.pending;
}

/**
 * Deliveries of other endpoints published and not yet finished, counted up to `cap`: whether live traffic is
 * on its way through the relay, JetStream and the workers (a range of deliveries_in_flight).
 */
export async function inFlightElsewhere(db: Queryable, endpointId: string, cap: number): Promise<number> {
  const { rows } = await db.query<{ in_flight: number }>(
    prepared(
      `SELECT count(*)::int AS in_flight FROM (SELECT 1 FROM deliveries
        WHERE state = 'pending' AND published_at IS NOT NULL AND endpoint_id <> $1 LIMIT $2) f`,
      [endpointId, cap],
    ),
  );
  return rows[0]!.in_flight;
}

interface ReplayState {
  readonly replay: Replay;
  readonly positionOccurredAt: Date | null;
  readonly positionEventId: string | null;
}

/** The replay and its position, row-locked for the chunk's transaction; undefined once it is not running. */
async function lockRunningReplay(db: Queryable, replayId: string): Promise<ReplayState | undefined> {
  const { rows } = await db.query<ReplayRow & { position_occurred_at: Date | null; position_event_id: string | null }>(
    `SELECT ${COLUMNS}, position_occurred_at, position_event_id FROM webhook_replays WHERE id = $1 AND status = 'running' FOR UPDATE`,
    [replayId],
  );
  const row = rows[0];
  return row ? { replay: toReplay(row), positionOccurredAt: row.position_occurred_at, positionEventId: row.position_event_id } : undefined;
}

async function finishReplay(db: Queryable, replayId: string, status: 'completed' | 'cancelled'): Promise<void> {
  await db.query(`UPDATE webhook_replays SET status = $2, completed_at = now() WHERE id = $1 AND status = 'running'`, [replayId, status]);
}

export interface ChunkResult {
  /** The replay's status after the chunk; `running` while events remain. */
  readonly status: ReplayStatus;
  readonly created: number;
}

/**
 * One chunk of a replay, in the caller's transaction: the next `chunkSize` events of the tenant in
 * (occurred_at, event_id) order from the replay's position, those matching the endpoint's filters (the
 * fan-out's rules, the payload filter read from each event's served document as fan-out reads it), less, with only_undelivered, those already delivered successfully to it, become
 * deliveries due now; the position moves to the last event scanned, and the counts with it. The relays
 * are notified when deliveries were created. A disabled or deleted endpoint cancels the replay.
 *
 * The position and the deliveries commit together, so a process killed at any point leaves the replay
 * exactly where its last committed chunk ended. The range is scanned through the events' primary key
 * (tenant, occurred_at, event_id) with plain parameters, so each chunk reads `chunkSize` index entries
 * whatever the range's size, and the partitions outside the range are pruned at planning.
 */
export async function replayChunk(db: Queryable, replayId: string, chunkSize: number): Promise<ChunkResult> {
  const state = await lockRunningReplay(db, replayId);
  if (!state) return { status: 'cancelled', created: 0 };
  const { replay } = state;
  // Locked as the fan-out locks: a deletion waits for this chunk, and a disable is seen by the next one.
  const endpoint = await shareEndpointForFanOut(db, replay.endpointId);
  if (!endpoint?.active) {
    await finishReplay(db, replayId, 'cancelled');
    return { status: 'cancelled', created: 0 };
  }
  const values: unknown[] = [
    replay.tenantId,
    replay.since.toISOString(),
    replay.until.toISOString(),
    chunkSize,
    endpoint.eventFilter,
    replay.onlyUndelivered,
    replay.endpointId,
    replayId,
    endpoint.payloadFilterPath,
    endpoint.ordered ? 'queued' : 'pending',
  ];
  let after = '';
  if (state.positionOccurredAt && state.positionEventId) {
    values.push(state.positionOccurredAt.toISOString(), state.positionEventId);
    after = `AND (e.occurred_at, e.event_id) > ($11::timestamptz, $12::uuid)`;
  }
  const { rows } = await db.query<{ status: ReplayStatus; created: number }>(
    `WITH scanned AS (
       SELECT e.tenant_id, e.event_id, e.action, e.occurred_at,
              CASE WHEN $9::jsonpath IS NOT NULL THEN audit_webhook_payload(${EVENT_DOCUMENT}) END AS payload
       FROM events e
       WHERE e.tenant_id = $1 AND e.occurred_at >= $2::timestamptz AND e.occurred_at < $3::timestamptz ${after}
       ORDER BY e.occurred_at, e.event_id
       LIMIT $4
     ), matched AS (
       SELECT s.* FROM scanned s
       WHERE ${eventFilterMatches('$5::text[]', 's.action')} AND ${payloadFilterMatches('$9::jsonpath', 's.payload')}
     ), wanted AS (
       SELECT m.* FROM matched m
       WHERE NOT $6::boolean
          -- deliveries_succeeded_by_event (migration 013): the event's successes, then the endpoint on each.
          OR NOT EXISTS (SELECT 1 FROM deliveries d
                         WHERE d.endpoint_id = $7 AND d.state = 'succeeded' AND d.event_occurred_at = m.occurred_at AND d.event_id = m.event_id)
     ), created AS (
       -- An ordered endpoint's replayed deliveries wait for their turn behind those it has already.
       INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state)
       SELECT $7, tenant_id, event_id, occurred_at, $10::text FROM wanted
       RETURNING state
     ), last_scanned AS (
       SELECT occurred_at, event_id FROM scanned ORDER BY occurred_at DESC, event_id DESC LIMIT 1
     ), counts AS (
       SELECT (SELECT count(*) FROM scanned) AS scanned, (SELECT count(*) FROM matched) AS matched, (SELECT count(*) FROM created) AS created
     )
     UPDATE webhook_replays r
     SET position_occurred_at = COALESCE((SELECT occurred_at FROM last_scanned), r.position_occurred_at),
         position_event_id = COALESCE((SELECT event_id FROM last_scanned), r.position_event_id),
         events_matched = r.events_matched + c.matched,
         deliveries_created = r.deliveries_created + c.created,
         -- A short chunk is the range's last.
         status = CASE WHEN c.scanned < $4 THEN 'completed' ELSE 'running' END,
         completed_at = CASE WHEN c.scanned < $4 THEN now() END
     FROM counts c
     WHERE r.id = $8
     RETURNING r.status, c.created::int AS created,
               ${wakeRelaysIfAny(`created WHERE state = 'pending'`)} AS notified,
               ${wakeRelaysIfAny(`created WHERE state = 'queued'`, 'queued deliveries')} AS notified_queued`,
    values,
  );
  return { status: rows[0]!.status, created: rows[0]!.created };
}
