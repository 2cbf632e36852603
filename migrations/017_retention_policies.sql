-- Retention (docs/retention.md): how long each tenant's events are kept. One row per tenant with a policy
-- of its own, written by the controller from a RetentionPolicy resource; a tenant without a row is kept for
-- RETENTION_DEFAULT (or forever when that is unset). The period is kept as written and as months and days,
-- the two parts of a calendar interval: events older than now() - (months, days) are past their period.
CREATE TABLE retention_policies (
  tenant_id     text        PRIMARY KEY,
  retain        text        NOT NULL,
  retain_months integer     NOT NULL CHECK (retain_months >= 0),
  retain_days   integer     NOT NULL CHECK (retain_days >= 0),
  locked        boolean     NOT NULL DEFAULT false,
  -- The archive settings of the policy (issue 31 item 3, not built yet): kept as declared.
  archive       jsonb,
  -- The resource that declared it (kubernetes:<namespace>/<name>/<uid>).
  managed_by    text        NOT NULL UNIQUE,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  CHECK (retain_months + retain_days > 0)
);

-- Whether a period of (months_a, days_a) is at least as long as (months_b, days_b) from any date: each part
-- at least as long, or its shortest possible length (28-day months) at least the other's longest (31-day
-- months). 1y against 12mo is equal; 365d against 1y is neither (a leap year), and is refused as shorter.
CREATE FUNCTION audit_retention_at_least(months_a integer, days_a integer, months_b integer, days_b integer)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT (months_a >= months_b AND days_a >= days_b) OR (months_a * 28 + days_a >= months_b * 31 + days_b)
$$;

-- A locked policy can be lengthened, never shortened, unlocked or removed: the controller refuses such a
-- change before it gets here, and this trigger refuses it for every other writer too (psql, a bug).
CREATE FUNCTION audit_guard_locked_retention() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT OLD.locked THEN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'the retention policy of tenant % is locked: it cannot be removed', OLD.tenant_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NOT NEW.locked OR NEW.tenant_id <> OLD.tenant_id
     OR NOT audit_retention_at_least(NEW.retain_months, NEW.retain_days, OLD.retain_months, OLD.retain_days) THEN
    RAISE EXCEPTION 'the retention policy of tenant % is locked at %: it can be lengthened, never shortened or unlocked',
      OLD.tenant_id, OLD.retain USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER retention_policies_locked
  BEFORE UPDATE OR DELETE ON retention_policies
  FOR EACH ROW EXECUTE FUNCTION audit_guard_locked_retention();

-- TRUNCATE fires no row trigger: refused outright while any policy is locked.
CREATE FUNCTION audit_guard_locked_retention_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM retention_policies WHERE locked) THEN
    RAISE EXCEPTION 'retention_policies holds locked policies: TRUNCATE is not allowed' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER retention_policies_no_truncate
  BEFORE TRUNCATE ON retention_policies
  FOR EACH STATEMENT EXECUTE FUNCTION audit_guard_locked_retention_truncate();
