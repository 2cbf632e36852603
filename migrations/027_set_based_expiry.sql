-- Expiry's cost bounded by its batch (BENCHMARKS.md, issue 31, "Where an expired event's time went"). Three
-- costs grew with the table or the pass rather than with the batch, and two were paid per row in PL/pgSQL:
--
-- 1. The batch's DELETE joined its chosen rows back to `events` by key, and with statistics the planner hashed
--    that join over a sequential scan of every partition (every tenant's events), once per batch. The DELETE
--    now reads the tenant's key range from the first chosen row to the last, in the primary key's index.
-- 2. Each batch chose its rows from the start of the tenant's expired range, stepping over the rows earlier
--    batches of the pass had removed. Once their index entries are marked dead that costs little, but they
--    can be marked only once no snapshot still sees the rows, and any long transaction on the server (an
--    export's cursor) holds that back: each batch then read every row removed before it, so a pass grew with
--    the square of its size (360,000 removed rows fetched again by one batch in the benchmark). A batch may now
--    name where the previous batch of its pass ended (resume_after_at, resume_after_id) and chooses after it.
-- 3. The service read each batch's count and range back from expired_events by batch_id, which no index
--    covered: a scan of every expired event so far, per batch. Now indexed.
-- 4. Every removed row ran a PL/pgSQL row guard (the batch looked up, the hold rule evaluated again) and the
--    hold rule twice. The guard is now one statement-level check over the removed rows (a transition table),
--    with the same refusals; and where the tenant has no hold in place, which the statement finds once, the
--    hold rule is not evaluated per row at all.

CREATE INDEX expired_events_by_batch ON expired_events (batch_id);

-- Where the previous batch of the same pass ended (its last removed event's key): this batch chooses after it.
-- A narrowing only: a batch without it chooses from the start, as before. An event stored meanwhile with an
-- older timestamp is left to the next pass.
ALTER TABLE expiry_batches
  ADD COLUMN resume_after_at timestamptz,
  ADD COLUMN resume_after_id uuid,
  ADD CHECK ((resume_after_at IS NULL) = (resume_after_id IS NULL));

-- As in 024 (the chosen rows, oldest first, at most the batch's bound), with the DELETE taking the range from
-- the first chosen row to the last under the same conditions, and the hold rule skipped for a tenant without a
-- hold in place. The statement reads one snapshot, and the chosen rows are the first that meet the conditions
-- in key order: the rows in that range that meet them are exactly the chosen ones. (Starting at the first
-- chosen row also skips, in the index, the rows earlier batches removed and vacuum has not yet cleared.)
CREATE OR REPLACE FUNCTION audit_apply_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('audit_trail.applying_expiry', NEW.id::text, true);
  WITH doomed AS MATERIALIZED (
    SELECT e.tenant_id, e.occurred_at, e.event_id FROM events e
     WHERE e.tenant_id = NEW.tenant_id AND e.occurred_at < NEW.kept_since
       AND (e.occurred_at, e.event_id) > (coalesce(NEW.resume_after_at, '-infinity'),
                                          coalesce(NEW.resume_after_id, '00000000-0000-0000-0000-000000000000'))
       AND (NOT EXISTS (SELECT 1 FROM legal_holds h WHERE h.tenant_id = NEW.tenant_id AND h.released_at IS NULL)
            OR NOT audit_event_held(e.tenant_id, e.occurred_at, e.action))
       AND (NEW.archive_key IS NULL OR EXISTS (
             SELECT 1 FROM expiry_archived_events a
              WHERE a.tenant_id = e.tenant_id AND a.archive_key = NEW.archive_key
                AND a.event_id = e.event_id AND a.occurred_at = e.occurred_at))
     ORDER BY e.occurred_at, e.event_id
     LIMIT NEW.batch_limit
  ), last AS (
    SELECT occurred_at, event_id FROM doomed ORDER BY occurred_at DESC, event_id DESC LIMIT 1
  ), gone AS (
    DELETE FROM events e
     WHERE e.tenant_id = NEW.tenant_id AND e.occurred_at < NEW.kept_since
       AND e.occurred_at >= (SELECT min(occurred_at) FROM doomed)
       AND (e.occurred_at, e.event_id) <= ((SELECT occurred_at FROM last), (SELECT event_id FROM last))
       AND (NOT EXISTS (SELECT 1 FROM legal_holds h WHERE h.tenant_id = NEW.tenant_id AND h.released_at IS NULL)
            OR NOT audit_event_held(e.tenant_id, e.occurred_at, e.action))
       AND (NEW.archive_key IS NULL OR EXISTS (
             SELECT 1 FROM expiry_archived_events a
              WHERE a.tenant_id = e.tenant_id AND a.archive_key = NEW.archive_key
                AND a.event_id = e.event_id AND a.occurred_at = e.occurred_at))
    RETURNING e.tenant_id, e.event_id, e.occurred_at
  )
  INSERT INTO expired_events (tenant_id, event_id, occurred_at, batch_id)
  SELECT tenant_id, event_id, occurred_at, NEW.id FROM gone
  ON CONFLICT (tenant_id, event_id) DO NOTHING;
  PERFORM set_config('audit_trail.applying_expiry', '', true);
  RETURN NULL;
END;
$$;

-- The guard of 020, once per statement over the rows it removed: refused unless run by the expiry's trigger
-- (depth 2, the batch named) and every row is the batch's tenant's, older than its kept_since and held by no
-- hold in place. After the rows are gone, but an exception undoes the statement, so nothing leaves unguarded.
CREATE FUNCTION audit_guard_expired_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  batch expiry_batches;
BEGIN
  SELECT * INTO batch FROM expiry_batches WHERE id = nullif(current_setting('audit_trail.applying_expiry', true), '')::bigint;
  IF pg_trigger_depth() < 2 OR batch.id IS NULL
     OR EXISTS (SELECT 1 FROM removed r WHERE r.tenant_id <> batch.tenant_id OR r.occurred_at >= batch.kept_since)
     OR (EXISTS (SELECT 1 FROM legal_holds h WHERE h.tenant_id = batch.tenant_id AND h.released_at IS NULL)
         AND EXISTS (SELECT 1 FROM removed r WHERE audit_event_held(r.tenant_id, r.occurred_at, r.action))) THEN
    RAISE EXCEPTION 'audit events are append-only: an event leaves only by the expiry of its period, unheld'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END;
$$;

-- On the table (a DELETE of events) and on each partition (a DELETE naming one): a statement's triggers are
-- those of the table it names, and transition tables are allowed on partitions for statement triggers only.
DROP TRIGGER events_expiry_only ON events;
DO $$
DECLARE
  relation regclass;
BEGIN
  FOR relation IN SELECT tgrelid::regclass FROM pg_trigger WHERE tgname = 'events_delete_only_by_expiry' LOOP
    EXECUTE format('CREATE TRIGGER events_expiry_only AFTER DELETE ON %s REFERENCING OLD TABLE AS removed '
                   'FOR EACH STATEMENT EXECUTE FUNCTION audit_guard_expired_rows()', relation);
  END LOOP;
END;
$$;

-- As in 020, with the statement guard on each new partition.
CREATE OR REPLACE FUNCTION audit_ensure_event_partition(at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
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
  EXECUTE format('CREATE TRIGGER events_append_only BEFORE TRUNCATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation()', partition);
  EXECUTE format('CREATE TRIGGER events_delete_only_by_expiry BEFORE DELETE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_expiry()', partition);
  EXECUTE format('CREATE TRIGGER events_expiry_only AFTER DELETE ON %I REFERENCING OLD TABLE AS removed '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_guard_expired_rows()', partition);
  EXECUTE format('CREATE TRIGGER events_update_only_by_redaction BEFORE UPDATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_redaction()', partition);
END;
$$;

-- expired_events.batch_id names an existing batch (020's foreign key), checked once per statement: the key
-- checked each row on its own, a query per expired event. Batches are never deleted or changed
-- (expiry_batches_append_only), so a batch that exists once always will.
ALTER TABLE expired_events DROP CONSTRAINT expired_events_batch_id_fkey;
CREATE FUNCTION audit_check_expired_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM added a WHERE NOT EXISTS (SELECT 1 FROM expiry_batches b WHERE b.id = a.batch_id)) THEN
    RAISE EXCEPTION 'expired_events names a batch that expiry_batches does not hold' USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END;
$$;
CREATE TRIGGER expired_events_name_a_batch
  AFTER INSERT ON expired_events REFERENCING NEW TABLE AS added
  FOR EACH STATEMENT EXECUTE FUNCTION audit_check_expired_batch();
