-- A narrower index for the replay's only_undelivered lookup (events/replayStore.ts), which asks whether an
-- event was delivered successfully to one endpoint. Migration 011 keyed it by (endpoint_id,
-- event_occurred_at, event_id): about 72 bytes an entry, a third of them the endpoint id, and one entry for
-- every successful delivery, so it became the third largest index of deliveries (21 MB per 180,000
-- deliveries, against 7.8 MB for the primary key). Keyed by the event alone it is 7.2 MB for the same rows
-- and the outcome statement writes 8 % fewer WAL bytes per delivery (865 → 791, bench/delivery.ts against
-- a private Postgres with pg_stat_statements). The lookup finds the event's successful deliveries (one per
-- endpoint it went to, so a handful) and checks the endpoint on those rows. Entries stay in time order, so a
-- success still writes at the right end of the index.
--
-- Compatible both ways: the replay's statement is the same before and after; only its index changes.
-- On a large deliveries table, build it beforehand with CREATE INDEX CONCURRENTLY under this name
-- (docs/operations.md "Upgrade and migrations"): IF NOT EXISTS then skips it here.
CREATE INDEX IF NOT EXISTS deliveries_succeeded_by_event ON deliveries (event_occurred_at, event_id) WHERE state = 'succeeded';
DROP INDEX IF EXISTS deliveries_succeeded_events;
