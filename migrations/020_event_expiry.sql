-- Expiry (docs/retention.md "Expiry"): events past their tenant's retention period and covered by no legal
-- hold are removed, in bounded batches, through one path.
--
-- The one path: INSERT INTO expiry_batches. The row is the record of the batch (tenant, the instant before
-- which its events are past their period, the period and where it came from, the batch's bound); its
-- trigger removes at most that many of the tenant's events older than that instant and not held, and
-- records each in expired_events (tenant, id, timestamp, batch: never its content). The events table allows
-- a DELETE only from inside that trigger, and only of rows the batch covers; a plain DELETE, by any role,
-- superusers included, is refused as before. TRUNCATE stays refused. (A superuser can still switch triggers
-- off; the Merkle tree keeps every leaf, and a leaf whose event is gone without a record here is reported as
-- missing by `audit-trail integrity check`, not as expired.)
CREATE TABLE expiry_batches (
  id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id    text        NOT NULL,
  kept_since   timestamptz NOT NULL,
  retain       text        NOT NULL,
  source       text        NOT NULL CHECK (source IN ('policy', 'default')),
  batch_limit  integer     NOT NULL CHECK (batch_limit BETWEEN 1 AND 100000),
  requested_at timestamptz NOT NULL DEFAULT now(),
  requested_by text        NOT NULL
);
CREATE INDEX expiry_batches_by_tenant ON expiry_batches (tenant_id, id);

-- What expired: enough to answer "this event existed, and expired then, under that policy" (a proof request
-- answers 410) and for the integrity check to tell expired leaves from missing ones. No content.
CREATE TABLE expired_events (
  tenant_id   text        NOT NULL,
  event_id    uuid        NOT NULL,
  occurred_at timestamptz NOT NULL,
  batch_id    bigint      NOT NULL REFERENCES expiry_batches (id),
  PRIMARY KEY (tenant_id, event_id)
);

-- Both records are append-only.
CREATE FUNCTION audit_reject_expiry_record_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'expiry records are append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER expiry_batches_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON expiry_batches
  FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_expiry_record_change();
CREATE TRIGGER expired_events_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON expired_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_expiry_record_change();

-- A batch may not reach into what the tenant's own policy keeps (the deployment default is the service's
-- configuration, which the database cannot see), nor expire a tenant whose policy asks for an archive first
-- (archiving is not built: nothing of such a tenant expires).
CREATE FUNCTION audit_check_expiry_batch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  policy retention_policies;
BEGIN
  SELECT * INTO policy FROM retention_policies WHERE tenant_id = NEW.tenant_id;
  IF policy.tenant_id IS NOT NULL THEN
    IF policy.archive IS NOT NULL THEN
      RAISE EXCEPTION 'tenant % asks for an archive before expiry, which this version does not write', NEW.tenant_id
        USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.kept_since > now() - make_interval(months => policy.retain_months, days => policy.retain_days) THEN
      RAISE EXCEPTION 'tenant % keeps its events %: a batch cannot expire what is newer', NEW.tenant_id, policy.retain
        USING ERRCODE = 'insufficient_privilege';
    END IF;
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER expiry_batches_within_policy
  BEFORE INSERT ON expiry_batches
  FOR EACH ROW EXECUTE FUNCTION audit_check_expiry_batch();

-- Removes the batch's events, oldest first, and records them. The setting names the batch for the events
-- table's triggers; it is local to the transaction and cleared at once.
CREATE FUNCTION audit_apply_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('audit_trail.applying_expiry', NEW.id::text, true);
  WITH doomed AS (
    SELECT tenant_id, occurred_at, event_id FROM events
     WHERE tenant_id = NEW.tenant_id AND occurred_at < NEW.kept_since
       AND NOT audit_event_held(tenant_id, occurred_at, action)
     ORDER BY occurred_at, event_id
     LIMIT NEW.batch_limit
  ), gone AS (
    DELETE FROM events e USING doomed d
     WHERE e.tenant_id = d.tenant_id AND e.occurred_at = d.occurred_at AND e.event_id = d.event_id
    RETURNING e.tenant_id, e.event_id, e.occurred_at
  )
  INSERT INTO expired_events (tenant_id, event_id, occurred_at, batch_id)
  SELECT tenant_id, event_id, occurred_at, NEW.id FROM gone;
  PERFORM set_config('audit_trail.applying_expiry', '', true);
  RETURN NULL;
END;
$$;
CREATE TRIGGER expiry_batches_apply
  AFTER INSERT ON expiry_batches
  FOR EACH ROW EXECUTE FUNCTION audit_apply_expiry();

-- A DELETE of events is allowed only as audit_apply_expiry's (a trigger's statement, depth 2, with the
-- batch named); statement-level, so a DELETE matching no row is refused too.
CREATE FUNCTION audit_allow_only_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND pg_trigger_depth() > 1 AND coalesce(current_setting('audit_trail.applying_expiry', true), '') <> '' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'audit events are append-only: % on % is not allowed (events leave only by expiry)', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- And only rows the batch covers: its tenant, older than its kept_since, held by no hold in place.
CREATE FUNCTION audit_guard_event_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  batch expiry_batches;
BEGIN
  SELECT * INTO batch FROM expiry_batches WHERE id = nullif(current_setting('audit_trail.applying_expiry', true), '')::bigint;
  IF pg_trigger_depth() < 2 OR batch.id IS NULL OR batch.tenant_id <> OLD.tenant_id OR OLD.occurred_at >= batch.kept_since
     OR audit_event_held(OLD.tenant_id, OLD.occurred_at, OLD.action) THEN
    RAISE EXCEPTION 'audit events are append-only: an event leaves only by the expiry of its period, unheld'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN OLD;
END;
$$;

-- Row-level on the partitioned table: cloned onto every partition, present and future.
CREATE TRIGGER events_expiry_only
  BEFORE DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION audit_guard_event_expiry();

-- The statement-level refusal keeps TRUNCATE; DELETE moves to the gate above, on the table and each partition.
DO $$
DECLARE
  relation regclass;
BEGIN
  FOR relation IN SELECT tgrelid::regclass FROM pg_trigger WHERE tgname = 'events_append_only' LOOP
    EXECUTE format('DROP TRIGGER events_append_only ON %s', relation);
    EXECUTE format('CREATE TRIGGER events_append_only BEFORE TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation()', relation);
    EXECUTE format('CREATE TRIGGER events_delete_only_by_expiry BEFORE DELETE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_expiry()', relation);
  END LOOP;
END;
$$;

-- As in 018, with DELETE through the expiry gate.
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
  EXECUTE format('CREATE TRIGGER events_update_only_by_redaction BEFORE UPDATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_redaction()', partition);
END;
$$;

-- A month's partition is dropped once nothing in it is kept: it holds no event (every one expired), and
-- its month ended before the previous one (the current and previous months stay for late writers; a
-- backfill of an older month creates its partition again). Returns the partitions dropped. DROP takes the
-- table's lock for a moment; the caller bounds the wait with lock_timeout.
CREATE FUNCTION audit_drop_expired_partitions() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  partition regclass;
  name text;
  upper_bound timestamptz;
  empty boolean;
BEGIN
  FOR partition, upper_bound IN
    SELECT c.oid::regclass,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass
  LOOP
    CONTINUE WHEN upper_bound IS NULL OR upper_bound > date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 month';
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', partition) INTO empty;
    CONTINUE WHEN NOT empty;
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', partition);
    -- Checked again under the lock: a writer may have backfilled a row meanwhile.
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', partition) INTO empty;
    CONTINUE WHEN NOT empty;
    name := partition::text;
    EXECUTE format('DROP TABLE %s', partition);
    RETURN NEXT name;
  END LOOP;
END;
$$;
