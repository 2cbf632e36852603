-- Redaction (docs/retention.md "Redaction"): an erasure request for personal data a producer put into free
-- text (a value of `details`, the `justification`) is honoured by replacing those values with the marker
-- "[redacted]", in the served document and in the columns, without touching anything else of the event. Its
-- leaf stays in the tree as it was sealed, so its position and leaf hash remain proven; only its content can
-- no longer be recomputed from what is served.
--
-- The one path: INSERT INTO event_redactions. The row is the record of the redaction (which fields, when,
-- under which reference, and the event's served form from then on, which holds no redacted value); its
-- trigger applies it to the event. The events table allows an UPDATE only from inside that trigger, and
-- only the change the record describes. A plain UPDATE, even of a value to the marker, is refused as before.
-- (A superuser can still switch triggers off; tamper evidence is what shows such a change: the document
-- no longer matches its leaf, and a forged `redaction` member has no record and no audit event.)
CREATE TABLE event_redactions (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id   text        NOT NULL,
  event_id    uuid        NOT NULL,
  occurred_at timestamptz NOT NULL,
  fields      text[]      NOT NULL CHECK (cardinality(fields) > 0),
  reference   text        NOT NULL CHECK (reference <> ''),
  redacted_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  -- The event's served document after this redaction.
  document    text        NOT NULL
);
CREATE INDEX event_redactions_by_event ON event_redactions (tenant_id, event_id);

-- The record is append-only too.
CREATE FUNCTION audit_reject_redaction_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'redaction records are append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER event_redactions_append_only
  BEFORE UPDATE OR DELETE OR TRUNCATE ON event_redactions
  FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_redaction_change();

-- Applies a redaction record to its event. The setting names the record being applied, for the events
-- table's triggers; it is local to the transaction and cleared at once.
CREATE FUNCTION audit_apply_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  changed integer;
BEGIN
  PERFORM set_config('audit_trail.applying_redaction', NEW.id::text, true);
  UPDATE events
     SET document = NEW.document,
         details = NEW.document::json->>'details',
         justification = NEW.document::json->>'justification'
   WHERE tenant_id = NEW.tenant_id AND occurred_at = NEW.occurred_at AND event_id = NEW.event_id;
  GET DIAGNOSTICS changed = ROW_COUNT;
  PERFORM set_config('audit_trail.applying_redaction', '', true);
  IF changed <> 1 THEN
    RAISE EXCEPTION 'tenant % has no event % at %', NEW.tenant_id, NEW.event_id, NEW.occurred_at USING ERRCODE = 'no_data_found';
  END IF;
  RETURN NULL;
END;
$$;
CREATE TRIGGER event_redactions_apply
  AFTER INSERT ON event_redactions
  FOR EACH ROW EXECUTE FUNCTION audit_apply_redaction();

-- An UPDATE of events is allowed only as audit_apply_redaction's (a trigger's statement, depth 2, with the
-- record named). Statement-level, like the refusal it replaces for UPDATE: an UPDATE matching no row is
-- refused too.
CREATE FUNCTION audit_allow_only_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() > 1 AND coalesce(current_setting('audit_trail.applying_redaction', true), '') <> '' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'audit events are append-only: UPDATE on % is not allowed (an event changes only by a redaction)', TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- And only the change the record describes: every column but details, justification and document as it
-- was; justification the marker when redacted, else as it was; details the old object with exactly the
-- redacted paths set to the marker (each must exist); the document those values and the other columns'
-- (jsonb equality: the members, not their order or spacing), plus a `redaction` member naming the fields.
CREATE FUNCTION audit_guard_event_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  marker constant jsonb := '"[redacted]"';
  applied event_redactions;
  served jsonb;
  expected jsonb := OLD.details::jsonb;
  path text[];
  field text;
  wanted text;
BEGIN
  SELECT * INTO applied FROM event_redactions
   WHERE id = nullif(current_setting('audit_trail.applying_redaction', true), '')::bigint;
  IF pg_trigger_depth() < 2 OR applied.id IS NULL OR applied.tenant_id <> OLD.tenant_id OR applied.event_id <> OLD.event_id
     OR applied.occurred_at <> OLD.occurred_at THEN
    RAISE EXCEPTION 'audit events are append-only: an event changes only by a redaction' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF to_jsonb(NEW) - '{details,justification,document}'::text[] IS DISTINCT FROM to_jsonb(OLD) - '{details,justification,document}'::text[] THEN
    RAISE EXCEPTION 'a redaction changes only details and justification' USING ERRCODE = 'insufficient_privilege';
  END IF;
  -- (plpgsql ends an IF's condition at its first THEN: no CASE inside one.)
  wanted := CASE WHEN 'justification' = ANY (applied.fields) THEN marker #>> '{}' ELSE OLD.justification END;
  IF NEW.justification IS DISTINCT FROM wanted THEN
    RAISE EXCEPTION 'a redaction sets justification to the marker, and only when it names it' USING ERRCODE = 'insufficient_privilege';
  END IF;
  FOREACH field IN ARRAY applied.fields LOOP
    CONTINUE WHEN field = 'justification';
    IF field NOT LIKE 'details._%' THEN
      RAISE EXCEPTION 'the field % cannot be redacted', field USING ERRCODE = 'insufficient_privilege';
    END IF;
    path := string_to_array(substr(field, 9), '.');
    IF expected #> path IS NULL THEN
      RAISE EXCEPTION 'the event has no field %', field USING ERRCODE = 'insufficient_privilege';
    END IF;
    expected := jsonb_set(expected, path, marker, false);
  END LOOP;
  IF NEW.details::jsonb IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'a redaction sets the named details to the marker and changes nothing else' USING ERRCODE = 'insufficient_privilege';
  END IF;
  served := NEW.document::jsonb;
  IF served - '{redaction}'::text[] IS DISTINCT FROM jsonb_build_object(
       'event_id', OLD.event_id::text,
       'timestamp', to_char(OLD.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       'action', OLD.action, 'user_id', OLD.user_id, 'user_role', OLD.user_role,
       'resource_type', OLD.resource_type, 'resource_id', OLD.resource_id, 'fields_accessed', OLD.fields_accessed,
       'phi_involved', OLD.phi_involved, 'tenant_id', OLD.tenant_id, 'source_ip', OLD.source_ip,
       'user_agent', OLD.user_agent, 'justification', NEW.justification, 'success', OLD.success, 'details', NEW.details)
     OR NOT coalesce(served->'redaction'->'fields' @> to_jsonb(applied.fields), false) THEN
    RAISE EXCEPTION 'the redacted document must be the event as it was, with the marker in the redacted fields and a redaction member naming them'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;

-- Row-level on the partitioned table: Postgres clones it onto every partition, present and future.
CREATE TRIGGER events_redaction_only
  BEFORE UPDATE ON events
  FOR EACH ROW EXECUTE FUNCTION audit_guard_event_redaction();

-- The statement-level refusal of migration 001 keeps DELETE and TRUNCATE; UPDATE moves to the gate above.
-- Statement triggers are not inherited, so the table and each partition get theirs, and new partitions too.
DO $$
DECLARE
  relation regclass;
BEGIN
  FOR relation IN SELECT tgrelid::regclass FROM pg_trigger WHERE tgname = 'events_append_only' LOOP
    EXECUTE format('DROP TRIGGER events_append_only ON %s', relation);
    EXECUTE format('CREATE TRIGGER events_append_only BEFORE DELETE OR TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation()', relation);
    EXECUTE format('CREATE TRIGGER events_update_only_by_redaction BEFORE UPDATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_redaction()', relation);
  END LOOP;
END;
$$;

-- As in 001, with the two statement triggers above.
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
  EXECUTE format('CREATE TRIGGER events_append_only BEFORE DELETE OR TRUNCATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_reject_event_mutation()', partition);
  EXECUTE format('CREATE TRIGGER events_update_only_by_redaction BEFORE UPDATE ON %I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit_allow_only_redaction()', partition);
END;
$$;
