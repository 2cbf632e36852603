-- Tamper evidence (docs/integrity.md): every event becomes a leaf of its tenant's append-only Merkle tree
-- (RFC 9162), and the sealer signs tree heads. Leaves are appended after commit, by the sealer role.

-- The events waiting for a leaf. A row is written by the statement that stores the events (the trigger
-- below), so it becomes visible exactly when they commit: a sealer can neither see an event before its
-- commit nor pass over one whose transaction committed late, as "everything after the last sealed id"
-- would (ids and timestamps are assigned at insert, not at commit). The sealer deletes the row in the
-- transaction that appends its leaves, so no event is sealed twice. One row per statement and tenant, its
-- events as arrays in insertion order: the write path pays one small row per batch, not one per event.
-- ingested_at and the bounds of occurred_at are the events' own: by them a proof finds an event's leaves
-- (merkle_leaf_ranges) from the event's row.
CREATE TABLE seal_queue (
  tenant_id         text          NOT NULL,
  id                bigint        GENERATED ALWAYS AS IDENTITY,
  enqueued_at       timestamptz   NOT NULL DEFAULT now(),
  ingested_at       timestamptz   NOT NULL,
  min_occurred_at   timestamptz   NOT NULL,
  max_occurred_at   timestamptz   NOT NULL,
  -- cardinality(event_ids), kept so that counting a backlog does not read (detoast) every array.
  event_count       integer       NOT NULL,
  event_occurred_at timestamptz[] NOT NULL,
  event_ids         uuid[]        NOT NULL,
  PRIMARY KEY (tenant_id, id)
);
-- Random UUIDs do not compress; trying costs the write path time for nothing.
ALTER TABLE seal_queue ALTER COLUMN event_ids SET STORAGE EXTERNAL, ALTER COLUMN event_occurred_at SET STORAGE EXTERNAL;

-- A statement-level trigger rather than a clause of the write path's statement: every writer is covered
-- (ingestion, admin events, import, a pod of the previous release during a rolling upgrade, psql), and a
-- statement that stored nothing (a producer's retry) queues nothing. Both arrays are aggregated from one
-- pass over the transition table, so their elements correspond. A bulk statement (a psql load, a
-- backfill) is queued in rows of 1,000 in event order, so that the sealer takes it in bounded
-- transactions and a proof finds a leaf among few rows; the write path's batches (at most 1,000 events)
-- take the cheap branch.
CREATE FUNCTION audit_enqueue_for_sealing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT count(*) FROM stored_events) <= 5000 THEN
    INSERT INTO seal_queue (tenant_id, ingested_at, min_occurred_at, max_occurred_at, event_count, event_occurred_at, event_ids)
    SELECT tenant_id, ingested_at, min(occurred_at), max(occurred_at), count(*), array_agg(occurred_at), array_agg(event_id)
      FROM stored_events GROUP BY tenant_id, ingested_at;
  ELSE
    INSERT INTO seal_queue (tenant_id, ingested_at, min_occurred_at, max_occurred_at, event_count, event_occurred_at, event_ids)
    SELECT tenant_id, ingested_at, min(occurred_at), max(occurred_at), count(*),
           array_agg(occurred_at ORDER BY occurred_at, event_id), array_agg(event_id ORDER BY occurred_at, event_id)
      FROM (SELECT tenant_id, ingested_at, occurred_at, event_id,
                   (row_number() OVER (PARTITION BY tenant_id, ingested_at ORDER BY occurred_at, event_id) - 1) / 1000 AS chunk
              FROM stored_events) numbered
     GROUP BY tenant_id, ingested_at, chunk
     ORDER BY tenant_id, ingested_at, chunk;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER events_enqueue_for_sealing
  AFTER INSERT ON events REFERENCING NEW TABLE AS stored_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_enqueue_for_sealing();

-- One row per tenant with a tree: its size and root, and the time of its latest head. The sealer that
-- holds the row's lock (FOR UPDATE) is the only one appending to that tenant's tree.
CREATE TABLE merkle_trees (
  tenant_id    text        PRIMARY KEY,
  tree_size    bigint      NOT NULL DEFAULT 0 CHECK (tree_size >= 0),
  root_hash    bytea,
  last_head_at timestamptz
);

-- Which event each leaf is: one row per queue row the sealer appended, its events in leaf order from
-- first_leaf on. A row per leaf (two index entries each) cost the sealer more than everything else it
-- does; the arrays move from the queue as they are. A proof finds an event's range from the event's row:
-- same tenant and ingested_at (one statement's), occurred_at within the bounds.
CREATE TABLE merkle_leaf_ranges (
  tenant_id         text          NOT NULL,
  first_leaf        bigint        NOT NULL CHECK (first_leaf >= 0),
  ingested_at       timestamptz   NOT NULL,
  min_occurred_at   timestamptz   NOT NULL,
  max_occurred_at   timestamptz   NOT NULL,
  event_occurred_at timestamptz[] NOT NULL,
  event_ids         uuid[]        NOT NULL CHECK (cardinality(event_ids) > 0),
  PRIMARY KEY (tenant_id, first_leaf),
  CHECK (cardinality(event_occurred_at) = cardinality(event_ids))
);
ALTER TABLE merkle_leaf_ranges ALTER COLUMN event_ids SET STORAGE EXTERNAL, ALTER COLUMN event_occurred_at SET STORAGE EXTERNAL;
CREATE INDEX merkle_leaf_ranges_by_statement ON merkle_leaf_ranges (tenant_id, ingested_at, min_occurred_at) INCLUDE (max_occurred_at);

-- The leaves one per row, for the integrity check and for people reading the database.
CREATE VIEW merkle_leaves AS
SELECT r.tenant_id, r.first_leaf + k.position - 1 AS leaf_index, k.event_occurred_at, k.event_id
  FROM merkle_leaf_ranges r
 CROSS JOIN LATERAL unnest(r.event_occurred_at, r.event_ids) WITH ORDINALITY AS k(event_occurred_at, event_id, position);

-- The tree's hashes as tiles (integrity/tiles.ts): up to 16 hashes of complete subtrees at tree level
-- 4 × level, concatenated. The last tile of a level grows until it is full.
CREATE TABLE merkle_tiles (
  tenant_id  text     NOT NULL,
  level      smallint NOT NULL,
  tile_index bigint   NOT NULL,
  hashes     bytea    NOT NULL CHECK (length(hashes) % 32 = 0 AND length(hashes) BETWEEN 32 AND 512),
  PRIMARY KEY (tenant_id, level, tile_index)
);

-- Public keys that signed tree heads, kept for as long as heads they signed are: a head verifies under the
-- key it names if it was signed within that key's window. A newer key retires the current one; a retired
-- key never becomes current again.
CREATE TABLE seal_keys (
  key_id         text        PRIMARY KEY CHECK (key_id ~ '^[0-9a-f]{32}$'),
  algorithm      text        NOT NULL DEFAULT 'Ed25519' CHECK (algorithm = 'Ed25519'),
  public_key_pem text        NOT NULL,
  valid_from     timestamptz NOT NULL DEFAULT now(),
  valid_until    timestamptz,
  CHECK (valid_until IS NULL OR valid_until >= valid_from)
);
CREATE UNIQUE INDEX seal_keys_one_current ON seal_keys ((true)) WHERE valid_until IS NULL;

-- Signed tree heads, one per sealing that added leaves and one per heartbeat. signed_at is the signed
-- timestamp (millisecond precision, strictly increasing per tenant), so it also orders the history.
CREATE TABLE tree_heads (
  tenant_id  text        NOT NULL,
  signed_at  timestamptz NOT NULL CHECK (signed_at = date_trunc('milliseconds', signed_at)),
  tree_size  bigint      NOT NULL CHECK (tree_size > 0),
  root_hash  bytea       NOT NULL CHECK (length(root_hash) = 32),
  key_id     text        NOT NULL REFERENCES seal_keys (key_id),
  signature  bytea       NOT NULL,
  PRIMARY KEY (tenant_id, signed_at)
);
CREATE INDEX tree_heads_by_size ON tree_heads (tenant_id, tree_size, signed_at);

-- The events stored before this migration are queued too, statement by statement, in rows of up to 1,000.
INSERT INTO seal_queue (tenant_id, ingested_at, min_occurred_at, max_occurred_at, event_count, event_occurred_at, event_ids)
SELECT tenant_id, ingested_at, min(occurred_at), max(occurred_at), count(*),
       array_agg(occurred_at ORDER BY occurred_at, event_id), array_agg(event_id ORDER BY occurred_at, event_id)
FROM (SELECT tenant_id, ingested_at, occurred_at, event_id,
             (row_number() OVER (PARTITION BY tenant_id, ingested_at ORDER BY occurred_at, event_id) - 1) / 1000 AS chunk
      FROM events) numbered
GROUP BY tenant_id, ingested_at, chunk
ORDER BY tenant_id, ingested_at, chunk;
