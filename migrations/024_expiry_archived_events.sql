-- Archive before expiry, exactly (docs/retention.md "Archive before expiry"): a batch that names an archive
-- object removes only the events recorded here as being in that object. Without this, an event stored with an
-- old timestamp after the object was read (a producer's late retry), or one a legal hold released meanwhile,
-- fell inside the batch's kept_since and was removed unarchived. The retention role records an object's
-- events once the object is read back intact, before its first batch. Append-only, like the other records.
CREATE TABLE expiry_archived_events (
  tenant_id   text        NOT NULL,
  archive_key text        NOT NULL,
  event_id    uuid        NOT NULL,
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, archive_key, event_id, occurred_at)
);
CREATE TRIGGER expiry_archived_events_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON expiry_archived_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_expiry_record_change();

-- As in 021, with a batch that names an archive limited to the events recorded in it.
CREATE OR REPLACE FUNCTION audit_apply_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('audit_trail.applying_expiry', NEW.id::text, true);
  WITH doomed AS (
    SELECT e.tenant_id, e.occurred_at, e.event_id FROM events e
     WHERE e.tenant_id = NEW.tenant_id AND e.occurred_at < NEW.kept_since
       AND NOT audit_event_held(e.tenant_id, e.occurred_at, e.action)
       AND (NEW.archive_key IS NULL OR EXISTS (
             SELECT 1 FROM expiry_archived_events a
              WHERE a.tenant_id = e.tenant_id AND a.archive_key = NEW.archive_key
                AND a.event_id = e.event_id AND a.occurred_at = e.occurred_at))
     ORDER BY e.occurred_at, e.event_id
     LIMIT NEW.batch_limit
  ), gone AS (
    DELETE FROM events e USING doomed d
     WHERE e.tenant_id = d.tenant_id AND e.occurred_at = d.occurred_at AND e.event_id = d.event_id
    RETURNING e.tenant_id, e.event_id, e.occurred_at
  )
  INSERT INTO expired_events (tenant_id, event_id, occurred_at, batch_id)
  SELECT tenant_id, event_id, occurred_at, NEW.id FROM gone
  ON CONFLICT (tenant_id, event_id) DO NOTHING;
  PERFORM set_config('audit_trail.applying_expiry', '', true);
  RETURN NULL;
END;
$$;
