-- Full entry bundles as the API built them (integrity/entryBundleStore.ts), kept so that a monitor reading a
-- log from the start costs the database one row per bundle instead of 256 events joined to their leaves and
-- rendered again (BENCHMARKS.md, "Tiles"). Shared by every api instance and kept across restarts. A bundle's
-- entries are kept as text, joined by newlines (canonical JSON holds none), rather than as the bundle's bytes:
-- bytea travels as hex, and decoding twice the bundle's size was most of what serving a kept one cost.
--
-- A bundle changes when one of its events is redacted or expires (its entry then says so), and a kept one
-- holds the event's content as it was: a redaction or an expiry therefore removes the tenant's kept bundles
-- and moves the generation of its bundles on, in its own transaction (the triggers below). A bundle is kept
-- with the generation read before its events were, only while that is still the generation (under a lock on
-- the generation's row, so that a redaction committing meanwhile either waits for it and removes it, or is
-- seen and keeps it out), and served only at that generation.
CREATE TABLE merkle_entry_bundles (
  tenant_id    text   NOT NULL,
  bundle_index bigint NOT NULL CHECK (bundle_index >= 0),
  generation   bigint NOT NULL,
  entries      text   NOT NULL,
  PRIMARY KEY (tenant_id, bundle_index)
);

-- lz4 where the server has it: a kept bundle is read far more often than written, and lz4 decompresses several
-- times faster than the default pglz, for about the same size here (8.7 MB for 500 bundles of 106 kB either way).
DO $$
BEGIN
  ALTER TABLE merkle_entry_bundles ALTER COLUMN entries SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END;
$$;

-- Per tenant, how many statements have redacted or expired its events; no row reads as 0 (a bundle is kept
-- only once its tenant has a row, so that there is a row to lock).
CREATE TABLE merkle_bundle_generations (
  tenant_id  text   PRIMARY KEY,
  generation bigint NOT NULL
);

-- Once per statement (an expiry batch removes thousands of events), for each tenant it touched. Per tenant,
-- not per bundle, since finding the leaves of every expired event would cost the expiry more than rebuilding
-- the bundles a monitor reads next costs the API; redactions and expiries are rare next to reads. The
-- generation first: its row lock orders this against a bundle being kept.
CREATE FUNCTION audit_next_bundle_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO merkle_bundle_generations (tenant_id, generation)
  SELECT DISTINCT tenant_id, 1 FROM changed
  ON CONFLICT (tenant_id) DO UPDATE SET generation = merkle_bundle_generations.generation + 1;
  DELETE FROM merkle_entry_bundles WHERE tenant_id IN (SELECT DISTINCT tenant_id FROM changed);
  RETURN NULL;
END;
$$;

CREATE TRIGGER event_redactions_change_bundles
  AFTER INSERT ON event_redactions REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION audit_next_bundle_generation();

CREATE TRIGGER expired_events_change_bundles
  AFTER INSERT ON expired_events REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION audit_next_bundle_generation();
