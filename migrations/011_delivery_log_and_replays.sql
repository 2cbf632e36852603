-- Webhook operations (docs/webhooks.md "Delivery log", "Manual retry", "Replay").
--
-- The delivery log lists an endpoint's deliveries newest first, optionally of one status, on endpoints that
-- may hold millions of rows. One index serves every form of it: the log reads one range of it per state
-- (pending, succeeded, failed, cancelled) and merges at most `limit` rows of each, so a page costs a few
-- index probes whatever the endpoint's size or the status asked for. Its leading column also serves what
-- deliveries_by_endpoint served (disable and delete find an endpoint's deliveries by it), and its state
-- column the replay's count of an endpoint's pending deliveries; so it replaces that index and the write
-- path keeps one per-endpoint index, only wider.
--
-- A migration runs in a transaction, so these indexes are built with the table's writes (and so fan-out,
-- and so ingestion) blocked while they build. On a large deliveries table, build them beforehand with
-- CREATE INDEX CONCURRENTLY under these names (docs/operations.md "Upgrade and migrations"): IF NOT EXISTS
-- then skips them here.
CREATE INDEX IF NOT EXISTS deliveries_log ON deliveries (endpoint_id, state, created_at, id);
DROP INDEX IF EXISTS deliveries_by_endpoint;

-- A replay with only_undelivered skips the events already delivered successfully to the endpoint: the
-- lookup is by endpoint and event. Partial, so a delivery enters it once (when it succeeds), not at each
-- of its updates.
CREATE INDEX IF NOT EXISTS deliveries_succeeded_events ON deliveries (endpoint_id, event_occurred_at, event_id) WHERE state = 'succeeded';

-- Set by a manual retry of a delivery that had already failed: its failure was counted towards the
-- endpoint's auto-disable once, and a failed retry must not count it again. A constant default is kept in
-- the catalog: adding the column rewrites nothing.
ALTER TABLE deliveries ADD COLUMN failure_counted boolean NOT NULL DEFAULT false;

-- Replays of a time range to one endpoint. The replaying process keeps its place in `position_*` (the
-- last event scanned, in (occurred_at, event_id) order), advanced in the transaction that inserts the
-- deliveries for the events up to it: a process killed at any point leaves the replay where its last
-- committed chunk ended, and the next one continues from there, no event skipped or doubled.
CREATE TABLE webhook_replays (
  id                   text        PRIMARY KEY CHECK (id ~ '^rpl_[0-9a-f]{32}$'),
  endpoint_id          text        NOT NULL,
  tenant_id            text        NOT NULL,
  since                timestamptz NOT NULL,
  until                timestamptz NOT NULL CHECK (until > since),
  only_undelivered     boolean     NOT NULL,
  status               text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'cancelled')),
  events_matched       bigint      NOT NULL DEFAULT 0,
  deliveries_created   bigint      NOT NULL DEFAULT 0,
  position_occurred_at timestamptz,
  position_event_id    uuid,
  created_at           timestamptz NOT NULL DEFAULT now(),
  completed_at         timestamptz,
  CHECK ((position_occurred_at IS NULL) = (position_event_id IS NULL)),
  CHECK ((status = 'running') = (completed_at IS NULL))
);

-- At most one running replay per endpoint (a second one is a 409), and the replaying processes' look for
-- work reads only running ones.
CREATE UNIQUE INDEX webhook_replays_running ON webhook_replays (endpoint_id) WHERE status = 'running';
CREATE INDEX webhook_replays_by_endpoint ON webhook_replays (endpoint_id, created_at);
