-- An event can be stored again after it expired: a producer's retry that supplies the same event_id and
-- timestamp, still inside the ingest window (a 30-day policy, a 40-day-old retry). Expired again, it would
-- collide with its first record in expired_events, and the batch (and every later pass of the tenant) would
-- fail. Its first record stays, and answers for it; the second removal is recorded by nothing more than its
-- batch's row. As in 020 otherwise.
CREATE OR REPLACE FUNCTION audit_apply_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
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
  SELECT tenant_id, event_id, occurred_at, NEW.id FROM gone
  ON CONFLICT (tenant_id, event_id) DO NOTHING;
  PERFORM set_config('audit_trail.applying_expiry', '', true);
  RETURN NULL;
END;
$$;
