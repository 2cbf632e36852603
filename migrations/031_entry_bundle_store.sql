-- Full entry bundles as the API built them (integrity/entryBundleStore.ts), kept so that a monitor reading a
-- log from the start costs the database one row per bundle instead of 256 events joined to their leaves and
-- rendered again (BENCHMARKS.md, "Tiles"). Shared by every api instance and kept across restarts.
--
-- A bundle changes when one of its events is redacted or expires (its entry then says so), so each is kept
-- with the generation of its tenant's bundles it was built at, and served only while that is still the
-- tenant's generation. A redaction or an expiry moves the generation on in its own transaction (the triggers
-- below), so no bundle built before it is served once it has committed. A bundle is tagged with the
-- generation read before its events are, never after: one built from events read after a change is tagged
-- older than it need be (rebuilt once), never newer than it is.
CREATE TABLE merkle_entry_bundles (
  tenant_id    text   NOT NULL,
  bundle_index bigint NOT NULL CHECK (bundle_index >= 0),
  generation   bigint NOT NULL,
  body         bytea  NOT NULL,
  PRIMARY KEY (tenant_id, bundle_index)
);

-- Per tenant, how many statements have redacted or expired its events; none yet reads as 0.
CREATE TABLE merkle_bundle_generations (
  tenant_id  text   PRIMARY KEY,
  generation bigint NOT NULL
);

-- Once per statement (an expiry batch removes thousands of events): one row per tenant it touched. Per tenant,
-- not per bundle, since finding the leaves of every expired event would cost the expiry more than rebuilding
-- the bundles a monitor reads next costs the API; redactions and expiries are rare next to reads.
CREATE FUNCTION audit_next_bundle_generation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO merkle_bundle_generations (tenant_id, generation)
  SELECT DISTINCT tenant_id, 1 FROM changed
  ON CONFLICT (tenant_id) DO UPDATE SET generation = merkle_bundle_generations.generation + 1;
  RETURN NULL;
END;
$$;

CREATE TRIGGER event_redactions_change_bundles
  AFTER INSERT ON event_redactions REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION audit_next_bundle_generation();

CREATE TRIGGER expired_events_change_bundles
  AFTER INSERT ON expired_events REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION audit_next_bundle_generation();
