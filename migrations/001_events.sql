-- The append-only event store. Partitioned by month on occurred_at (retention is a partition drop; indexes
-- stay small). The primary key leads with tenant_id and includes the partition key, and its order
-- (occurred_at, event_id) is the list order read backwards.
CREATE TABLE events (
  tenant_id       text        NOT NULL,
  occurred_at     timestamptz NOT NULL,
  event_id        uuid        NOT NULL,
  action          text        NOT NULL,
  user_id         text        NOT NULL,
  user_role       text        NOT NULL,
  resource_type   text        NOT NULL,
  resource_id     text        NOT NULL,
  fields_accessed text        NOT NULL DEFAULT '',
  phi_involved    boolean     NOT NULL,
  source_ip       text        NOT NULL DEFAULT '',
  user_agent      text        NOT NULL DEFAULT '',
  justification   text        NOT NULL DEFAULT '',
  success         boolean     NOT NULL,
  details         text        NOT NULL DEFAULT '{}',
  ingested_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, occurred_at, event_id),
  -- Millisecond precision is part of the contract (docs/api.md), and the cursor relies on it.
  CONSTRAINT events_millisecond_precision CHECK (occurred_at = date_trunc('milliseconds', occurred_at))
) PARTITION BY RANGE (occurred_at);

-- Lookup by id, and one index per filter so that a selective filter never scans a tenant's whole trail.
CREATE INDEX events_event_id ON events (event_id);
CREATE INDEX events_by_action ON events (tenant_id, action, occurred_at, event_id);
CREATE INDEX events_by_resource_type ON events (tenant_id, resource_type, occurred_at, event_id);
CREATE INDEX events_by_phi ON events (tenant_id, phi_involved, occurred_at, event_id);

CREATE FUNCTION audit_reject_event_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit events are append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- Statement-level, so even an UPDATE or DELETE matching no row is refused. Statement triggers are not
-- inherited by partitions, so audit_ensure_event_partition adds them to each partition as well.
CREATE TRIGGER events_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation();

-- Creates the partition for the month holding `at` (UTC) if it is missing. Serialised by an advisory lock
-- so that concurrent writers of the first event of a month do not race.
CREATE FUNCTION audit_ensure_event_partition(at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  month_start timestamptz := date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
  month_end   timestamptz := month_start + interval '1 month';
  partition   text := 'events_' || to_char(month_start AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  IF to_regclass(partition) IS NOT NULL THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('audit_trail.event_partitions'));
  -- Another session may have created it while we waited. An advisory lock does not refresh this session's
  -- catalog cache, so to_regclass can still miss it: the duplicate_table handler is the real guard.
  BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                   partition, month_start, month_end);
  EXCEPTION WHEN duplicate_table OR unique_violation THEN
    RETURN;
  END;
  EXECUTE format('CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation()', partition);
END;
$$;

-- Partitions for the previous month through three months ahead; the ingest role keeps creating months
-- ahead, and the write path creates any other month an event needs (a backfill of old events).
SELECT audit_ensure_event_partition(now() + make_interval(months => m)) FROM generate_series(-1, 3) AS m;

REVOKE UPDATE, DELETE, TRUNCATE ON events FROM PUBLIC;

-- The API representation of an event (the field order of docs/api.md). Rendering ROW(...)::audit_event_v2 with
-- row_to_json gives compact JSON straight from Postgres.
CREATE TYPE audit_event_v2 AS (
  event_id        uuid,
  "timestamp"     text,
  action          text,
  user_id         text,
  user_role       text,
  resource_type   text,
  resource_id     text,
  fields_accessed text,
  phi_involved    boolean,
  tenant_id       text,
  source_ip       text,
  user_agent      text,
  justification   text,
  success         boolean,
  details         text
);
