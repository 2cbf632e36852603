-- The list and export filters user_id and resource_id (docs/api.md): "what did this user do" and "who touched
-- this record", each answered from an index of its own in list order, like the other filters of migration
-- 001, so that a page for one user or one resource among millions of a tenant's events reads about one
-- page's index entries and rows. A query giving resource_type too reads the resource_id index and checks the
-- type on its rows: resource ids are rarely shared between types, and keeping resource_type out of the key
-- leaves the index in list order for a resource_id given alone.
--
-- On a large events table, build them beforehand without blocking ingestion (docs/operations.md "Upgrade and
-- migrations"): IF NOT EXISTS then skips them here.
CREATE INDEX IF NOT EXISTS events_by_user ON events (tenant_id, user_id, occurred_at, event_id);
CREATE INDEX IF NOT EXISTS events_by_resource ON events (tenant_id, resource_id, occurred_at, event_id);
