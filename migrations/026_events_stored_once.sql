-- Each event stored once (docs/operations.md "How events are stored"). Until now a row held the event twice:
-- fifteen columns, and the JSON document the API serves rendered from them (migration 005). The compact form
-- keeps only what keys, indexes and filters need as columns (tenant_id, occurred_at, event_id, action,
-- user_id, resource_type, resource_id, phi_involved), and the rest of the document as its member values in
-- order, each the JSON text it has in the document, separated by U+001F (which JSON text never holds raw):
-- the document without its member names, which are the same for every version-1 event, and without the four
-- values Postgres writes from their columns as fast as it reads them (the id, the action, the PHI flag and the
-- tenant: no escaping, no formatting). The timestamp, the user and the resource stay in the values as well,
-- since rendering them from their columns (to_char, to_json) would cost each read more than it saves
-- (BENCHMARKS.md, issue 30). Reads put the document together (audit_event_document below), byte for byte the
-- document the writer rendered and hashed into the event's Merkle leaf.
--
-- Rows of every earlier form stay readable as they are: with a document (since 005), or with the columns
-- only (before it). `audit-trail events compact` rewrites the first kind into the compact form, online and
-- resumable, through the one UPDATE the table allows for it (below).
ALTER TABLE events ADD COLUMN document_values text;

-- The columns only the served document needs are left empty (NULL) by compact writers, which name them
-- with NULL: their defaults stay for rows inserted by hand as before. Dropping NOT NULL changes the catalog
-- only; no partition is rewritten.
ALTER TABLE events
  ALTER COLUMN user_role DROP NOT NULL,
  ALTER COLUMN fields_accessed DROP NOT NULL,
  ALTER COLUMN source_ip DROP NOT NULL,
  ALTER COLUMN user_agent DROP NOT NULL,
  ALTER COLUMN justification DROP NOT NULL,
  ALTER COLUMN success DROP NOT NULL,
  ALTER COLUMN details DROP NOT NULL;

-- The served document of a row that stores one, or that stores its values: the stored document as written
-- (a redacted event's, or one of a later version), else the version-1 document put together from the values
-- and the row's id, action, PHI flag and tenant. NULL for a row of neither kind (rendered from its columns by
-- the reader, eventDocument.EVENT_JSON). A single expression, as volatile as format() (STABLE), so the
-- planner inlines it into each read: one array and one format() per row, no more than splitting the values.
CREATE FUNCTION audit_event_document(document text, document_values text, event_id uuid, action text, phi_involved boolean,
                                     tenant_id text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN document IS NOT NULL THEN document
    WHEN document_values IS NOT NULL THEN format(
      '{"event_id":"%1$s","timestamp":%5$s,"action":"%2$s","user_id":%6$s,"user_role":%7$s,"resource_type":%8$s,'
      '"resource_id":%9$s,"fields_accessed":%10$s,"phi_involved":%3$s,"tenant_id":"%4$s","source_ip":%11$s,'
      '"user_agent":%12$s,"justification":%13$s,"success":%14$s,"details":%15$s}',
      VARIADIC ARRAY[event_id::text, action, phi_involved::text, tenant_id] || string_to_array(document_values, E'\x1f'))
  END
$$;

-- Which form writers store (eventStore.storedForm). A database that holds events already may be served by pods
-- of the previous release during the rolling upgrade, which cannot read the compact form: it keeps the full
-- form until `audit-trail events compact` switches it, once the rollout is over. An empty one is compact
-- from the start.
CREATE TABLE event_storage (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  form      text    NOT NULL CHECK (form IN ('full', 'compact')),
  since     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO event_storage (form) SELECT CASE WHEN EXISTS (SELECT 1 FROM events) THEN 'full' ELSE 'compact' END;

-- Progress of `audit-trail events compact`, per partition: the last primary key it rewrote, so that a run
-- stopped anywhere resumes there.
CREATE TABLE event_compaction_progress (
  partition       text        PRIMARY KEY,
  after_tenant_id text,
  after_occurred  timestamptz,
  after_event_id  uuid,
  compacted       bigint      NOT NULL DEFAULT 0,
  kept            bigint      NOT NULL DEFAULT 0,
  finished_at     timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- An UPDATE of events is allowed as a redaction's (migration 018) or as a compaction's: the session names
-- itself compacting, and the row guard below lets through only a change that keeps the served document byte
-- for byte. Any role may compact; none can change an event's content that way.
CREATE OR REPLACE FUNCTION audit_allow_only_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_trigger_depth() > 1 AND coalesce(current_setting('audit_trail.applying_redaction', true), '') <> '' THEN
    RETURN NULL;
  END IF;
  IF coalesce(current_setting('audit_trail.compacting', true), '') = 'on' THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION 'audit events are append-only: UPDATE on % is not allowed (an event changes only by a redaction)', TG_TABLE_NAME
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

-- A redaction of a compact row stores the redacted document, and drops the values it replaces; the columns of
-- a full row are redacted with it, as before.
CREATE OR REPLACE FUNCTION audit_apply_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  changed integer;
BEGIN
  PERFORM set_config('audit_trail.applying_redaction', NEW.id::text, true);
  UPDATE events
     SET document = NEW.document,
         document_values = NULL,
         details = CASE WHEN details IS NULL THEN NULL ELSE NEW.document::json->>'details' END,
         justification = CASE WHEN justification IS NULL THEN NULL ELSE NEW.document::json->>'justification' END
   WHERE tenant_id = NEW.tenant_id AND occurred_at = NEW.occurred_at AND event_id = NEW.event_id;
  GET DIAGNOSTICS changed = ROW_COUNT;
  PERFORM set_config('audit_trail.applying_redaction', '', true);
  IF changed <> 1 THEN
    RAISE EXCEPTION 'tenant % has no event % at %', NEW.tenant_id, NEW.event_id, NEW.occurred_at USING ERRCODE = 'no_data_found';
  END IF;
  RETURN NULL;
END;
$$;

-- The event as a row of any form serves it, parsed: the stored document or values, else its columns.
CREATE FUNCTION audit_event_as_served(e jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(audit_event_document(e->>'document', e->>'document_values', (e->>'event_id')::uuid, e->>'action',
                                       (e->>'phi_involved')::boolean, e->>'tenant_id')::jsonb, jsonb_build_object(
    'event_id', e->'event_id', 'timestamp', to_char((e->>'occurred_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'action', e->'action', 'user_id', e->'user_id', 'user_role', e->'user_role', 'resource_type', e->'resource_type',
    'resource_id', e->'resource_id', 'fields_accessed', e->'fields_accessed', 'phi_involved', e->'phi_involved',
    'tenant_id', e->'tenant_id', 'source_ip', e->'source_ip', 'user_agent', e->'user_agent',
    'justification', e->'justification', 'success', e->'success', 'details', e->'details'))
$$;

-- The row guard of every UPDATE (migration 018's, for rows of every form). A compaction: nothing but the form
-- changes (keys, version, leaf hash as they were), the row keeps one form only, and serves the same bytes.
-- A redaction: only the change the record describes: the event as served before, with the marker in exactly
-- the redacted fields (each must exist) and a `redaction` member naming them; a full row's details and
-- justification columns redacted alike, a compact row's left empty.
CREATE OR REPLACE FUNCTION audit_guard_event_redaction() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  marker constant jsonb := '"[redacted]"';
  content constant text[] := '{user_role,fields_accessed,source_ip,user_agent,justification,success,details,document,document_values}';
  applied event_redactions;
  expected jsonb;
  expected_details jsonb;
  path text[];
  field text;
BEGIN
  IF to_jsonb(NEW) - content IS DISTINCT FROM to_jsonb(OLD) - content THEN
    RAISE EXCEPTION 'an event''s keys, version and leaf never change' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF pg_trigger_depth() = 1 AND coalesce(current_setting('audit_trail.compacting', true), '') = 'on' THEN
    IF OLD.document IS NULL
       OR audit_event_document(NEW.document, NEW.document_values, NEW.event_id, NEW.action, NEW.phi_involved, NEW.tenant_id)
          IS DISTINCT FROM OLD.document
       OR (NEW.document IS NOT NULL AND NEW.document_values IS NOT NULL)
       OR num_nonnulls(NEW.user_role, NEW.fields_accessed, NEW.source_ip, NEW.user_agent, NEW.justification, NEW.success, NEW.details) > 0 THEN
      RAISE EXCEPTION 'a compaction keeps the served document byte for byte, in one form' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
  END IF;
  SELECT * INTO applied FROM event_redactions
   WHERE id = nullif(current_setting('audit_trail.applying_redaction', true), '')::bigint;
  IF pg_trigger_depth() < 2 OR applied.id IS NULL OR applied.tenant_id <> OLD.tenant_id OR applied.event_id <> OLD.event_id
     OR applied.occurred_at <> OLD.occurred_at THEN
    RAISE EXCEPTION 'audit events are append-only: an event changes only by a redaction' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF to_jsonb(NEW) - '{details,justification,document,document_values}'::text[]
     IS DISTINCT FROM to_jsonb(OLD) - '{details,justification,document,document_values}'::text[]
     OR NEW.document IS NULL OR NEW.document_values IS NOT NULL THEN
    RAISE EXCEPTION 'a redaction changes only details and justification' USING ERRCODE = 'insufficient_privilege';
  END IF;
  expected := audit_event_as_served(to_jsonb(OLD)) - 'redaction';
  IF 'justification' = ANY (applied.fields) THEN
    expected := jsonb_set(expected, '{justification}', marker);
  END IF;
  expected_details := (expected->>'details')::jsonb;
  FOREACH field IN ARRAY applied.fields LOOP
    CONTINUE WHEN field = 'justification';
    IF field NOT LIKE 'details._%' THEN
      RAISE EXCEPTION 'the field % cannot be redacted', field USING ERRCODE = 'insufficient_privilege';
    END IF;
    path := string_to_array(substr(field, 9), '.');
    IF expected_details #> path IS NULL THEN
      RAISE EXCEPTION 'the event has no field %', field USING ERRCODE = 'insufficient_privilege';
    END IF;
    expected_details := jsonb_set(expected_details, path, marker, false);
  END LOOP;
  IF (NEW.document::jsonb - 'redaction') - 'details' IS DISTINCT FROM expected - 'details'
     OR (NEW.document::jsonb->>'details')::jsonb IS DISTINCT FROM expected_details
     OR NOT coalesce(NEW.document::jsonb->'redaction'->'fields' @> to_jsonb(applied.fields), false) THEN
    RAISE EXCEPTION 'the redacted document must be the event as it was, with the marker in the redacted fields and a redaction member naming them'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.justification IS DISTINCT FROM (CASE WHEN OLD.justification IS NULL THEN NULL ELSE expected->>'justification' END)
     OR NEW.details::jsonb IS DISTINCT FROM (CASE WHEN OLD.details IS NULL THEN NULL ELSE expected_details END) THEN
    RAISE EXCEPTION 'a redaction sets the named columns to the marker and changes nothing else' USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;

-- Every field of every event as a column, whatever form its row is stored in: for people reading the trail
-- with SQL (an operator's psql, the tests), since a compact row's free-text fields live in its values only.
-- Each field as the event is served (a redacted value as its marker).
CREATE VIEW event_fields AS
SELECT e.tenant_id, e.occurred_at, e.event_id, e.action, e.user_id, e.resource_type, e.resource_id, e.phi_involved,
       coalesce(e.user_role, s.served->>'user_role') AS user_role,
       coalesce(e.fields_accessed, s.served->>'fields_accessed') AS fields_accessed,
       coalesce(e.source_ip, s.served->>'source_ip') AS source_ip,
       coalesce(e.user_agent, s.served->>'user_agent') AS user_agent,
       coalesce(e.justification, s.served->>'justification') AS justification,
       coalesce(e.success, (s.served->>'success')::boolean) AS success,
       coalesce(e.details, s.served->>'details') AS details,
       e.document, e.document_values, e.document_version, e.leaf_hash, e.ingested_at
  FROM events e
  CROSS JOIN LATERAL (SELECT audit_event_document(e.document, e.document_values, e.event_id, e.action, e.phi_involved, e.tenant_id)::json
                        AS served) s;
