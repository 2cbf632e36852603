-- Archive before expiry (docs/retention.md "Archive before expiry"): a tenant whose policy has an archive
-- spec may now expire, but only in batches that name the archive object holding what they remove. The
-- retention role writes that object (NDJSON.gz, every event with its inclusion proof and the covering
-- signed tree head) to S3-compatible storage, reads it back and checks it, and only then inserts the batch
-- with the object's key and its kept_since set to the object's upper bound. The database cannot see S3: what
-- it holds is the line that no batch of such a tenant removes anything without naming an archive, and the
-- record (here, append-only) of which object each batch relied on.
ALTER TABLE expiry_batches ADD COLUMN archive_key text;

-- As in 020, with the archive refusal narrowed to batches that name no archive.
CREATE OR REPLACE FUNCTION audit_check_expiry_batch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  policy retention_policies;
BEGIN
  SELECT * INTO policy FROM retention_policies WHERE tenant_id = NEW.tenant_id;
  IF policy.tenant_id IS NOT NULL THEN
    IF policy.archive IS NOT NULL AND NEW.archive_key IS NULL THEN
      RAISE EXCEPTION 'tenant % asks for an archive before expiry: a batch must name the archive object it relies on', NEW.tenant_id
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
