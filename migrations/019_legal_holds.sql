-- Legal holds (docs/retention.md): while a hold is in place, no event it covers expires, whatever the
-- retention policy says. One row per LegalHold resource; releasing a hold (deleting the resource) sets
-- released_at and keeps the row, so the history of holds stays with the trail it froze.
CREATE TABLE legal_holds (
  id              text        PRIMARY KEY CHECK (id ~ '^hold_[0-9a-f]{32}$'),
  tenant_id       text        NOT NULL,
  -- The covered range of event timestamps: since inclusive, until exclusive, either open when NULL.
  since           timestamptz,
  until           timestamptz,
  -- Action families as webhook filters take them (`phi.` or `phi`: every phi.* action; `phi.read`: that
  -- action and its sub-actions); empty: every action.
  action_prefixes text[]      NOT NULL DEFAULT '{}',
  reason          text        NOT NULL,
  reference       text        NOT NULL,
  -- The resource that placed it (kubernetes:<namespace>/<name>/<uid>).
  managed_by      text        NOT NULL UNIQUE,
  placed_at       timestamptz NOT NULL DEFAULT now(),
  released_at     timestamptz,
  released_by     text,
  CHECK (since IS NULL OR until IS NULL OR since < until),
  CHECK ((released_at IS NULL) = (released_by IS NULL))
);
CREATE INDEX legal_holds_in_place ON legal_holds (tenant_id) WHERE released_at IS NULL;

-- Whether a hold in place covers an event: the one definition the expiry, its plan and the events table's
-- guard share.
CREATE FUNCTION audit_event_held(event_tenant text, event_at timestamptz, event_action text)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT 1 FROM legal_holds h
     WHERE h.tenant_id = event_tenant AND h.released_at IS NULL
       AND (h.since IS NULL OR event_at >= h.since)
       AND (h.until IS NULL OR event_at < h.until)
       AND (cardinality(h.action_prefixes) = 0
            OR EXISTS (SELECT 1 FROM unnest(h.action_prefixes) AS entry
                        WHERE event_action = entry
                           OR starts_with(event_action, CASE WHEN right(entry, 1) = '.' THEN entry ELSE entry || '.' END))))
$$;

-- A hold's scope never changes once placed, and a released hold is never placed again: only the release
-- itself (released_at, released_by, once) may be written. Rows are never deleted.
CREATE FUNCTION audit_guard_legal_holds() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR OLD.released_at IS NOT NULL
     OR (NEW.id, NEW.tenant_id, NEW.since, NEW.until, NEW.action_prefixes, NEW.reason, NEW.reference, NEW.managed_by, NEW.placed_at)
        IS DISTINCT FROM
        (OLD.id, OLD.tenant_id, OLD.since, OLD.until, OLD.action_prefixes, OLD.reason, OLD.reference, OLD.managed_by, OLD.placed_at) THEN
    RAISE EXCEPTION 'legal holds are only ever released: % on hold % is not allowed', TG_OP, OLD.id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;

CREATE TRIGGER legal_holds_release_only
  BEFORE UPDATE OR DELETE ON legal_holds
  FOR EACH ROW EXECUTE FUNCTION audit_guard_legal_holds();

CREATE FUNCTION audit_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'TRUNCATE on % is not allowed', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER legal_holds_no_truncate
  BEFORE TRUNCATE ON legal_holds
  FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_truncate();
