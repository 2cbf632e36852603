-- Webhook endpoints as their users configure them (docs/webhooks.md, issue 46): payload filters, custom
-- headers, a timeout, retry schedule and rate limit of their own, ordered delivery, Ed25519 signatures,
-- operational endpoints and their notices. Every new column has the seed's behaviour as its default (NULL or
-- a constant), so adding them rewrites nothing and an endpoint registered before this migration behaves as
-- it did.
--
-- Additive for the code before it: it never reads these columns, never writes 'queued', and treats a
-- message for a queued delivery as stale. After a rollback to such code, queued deliveries (those of ordered
-- endpoints waiting for their turn) wait until they are made pending again by hand, and operational
-- endpoints receive the trail's events like any other endpoint.
ALTER TABLE webhook_endpoints
  -- 'operational' endpoints receive the service's notices about the tenant's endpoints and streams
  -- (webhook_operational_events below), never the trail's events; 'events' ones the opposite.
  ADD COLUMN kind                            text      NOT NULL DEFAULT 'events' CHECK (kind IN ('events', 'operational')),
  -- The filter as the API takes and shows it, and the same filter compiled to an SQL/JSON path predicate
  -- (webhooks/payloadFilter.ts) that fan-out evaluates against each event's delivery body.
  ADD COLUMN payload_filter                  jsonb,
  ADD COLUMN payload_filter_path             jsonpath,
  -- Custom request headers: their names in the clear (the API lists them), the names and values together
  -- sealed with SECRET_ENCRYPTION_KEY (values may be credentials: never returned, never logged).
  ADD COLUMN header_names                    text[]    NOT NULL DEFAULT '{}',
  ADD COLUMN headers_ciphertext              bytea,
  -- NULL: the service's DELIVERY_TIMEOUT_MS and DELIVERY_SCHEDULE; no rate limit.
  ADD COLUMN timeout_s                       integer   CHECK (timeout_s BETWEEN 1 AND 30),
  ADD COLUMN retry_schedule_s                integer[] CHECK (cardinality(retry_schedule_s) <= 7),
  ADD COLUMN rate_limit_per_s                integer   CHECK (rate_limit_per_s BETWEEN 1 AND 1000),
  -- One delivery at a time, in the order the events were written (state 'queued' below).
  ADD COLUMN ordered                         boolean   NOT NULL DEFAULT false,
  ADD COLUMN signature_schemes               text[]    NOT NULL DEFAULT '{hmac}'
    CHECK (cardinality(signature_schemes) >= 1 AND signature_schemes <@ '{hmac,ed25519}'),
  -- The Ed25519 signing key (its 32-byte seed, sealed) and its public key; a rotation keeps the replaced
  -- pair signing until previous_secret_expires_at, as it keeps the replaced HMAC secret.
  ADD COLUMN ed25519_key_ciphertext          bytea,
  ADD COLUMN ed25519_public_key              bytea,
  ADD COLUMN previous_ed25519_key_ciphertext bytea,
  ADD COLUMN previous_ed25519_public_key     bytea,
  ADD CONSTRAINT webhook_endpoints_payload_filter_complete CHECK ((payload_filter IS NULL) = (payload_filter_path IS NULL)),
  ADD CONSTRAINT webhook_endpoints_headers_complete CHECK ((headers_ciphertext IS NULL) = (cardinality(header_names) = 0)),
  ADD CONSTRAINT webhook_endpoints_ed25519_complete CHECK (
    (ed25519_key_ciphertext IS NULL) = (ed25519_public_key IS NULL)
    AND (previous_ed25519_key_ciphertext IS NULL) = (previous_ed25519_public_key IS NULL)
    AND ('ed25519' <> ALL (signature_schemes) OR ed25519_key_ciphertext IS NOT NULL));

-- A delivery of an ordered endpoint waits as 'queued' until every delivery of the endpoint before it has
-- succeeded or failed for good; then the oldest queued one becomes pending (delivery/orderedDeliveries.ts).
-- NOT VALID: every existing row satisfies the stricter check it replaces, and validating would read the
-- whole table under this migration's lock.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
  CHECK (state IN ('pending', 'parked', 'queued', 'succeeded', 'failed', 'cancelled')) NOT VALID;
-- The next delivery of an endpoint, and the endpoints that have one waiting: queued rows only.
CREATE INDEX deliveries_queued ON deliveries (endpoint_id, id) WHERE state = 'queued';

-- The service's notices to a tenant about its own endpoints and streams (docs/webhooks.md "Operational
-- events"), delivered to its operational endpoints like events to the others: deliveries name them by id
-- (deliveries.event_id, with occurred_at as event_occurred_at). Not in the trail: they describe the
-- service's work, and the trail's endpoints must not receive them.
CREATE TABLE webhook_operational_events (
  id            uuid        PRIMARY KEY,
  tenant_id     text        NOT NULL,
  occurred_at   timestamptz NOT NULL DEFAULT now(),
  type          text        NOT NULL
                CHECK (type IN ('endpoint.failing', 'endpoint.disabled', 'endpoint.enabled', 'stream.failing', 'stream.recovered')),
  resource_type text        NOT NULL CHECK (resource_type IN ('webhook_endpoint', 'log_stream')),
  resource_id   text        NOT NULL,
  success       boolean     NOT NULL,
  details       jsonb       NOT NULL
);
CREATE INDEX webhook_operational_events_by_tenant ON webhook_operational_events (tenant_id, occurred_at DESC, id DESC);

-- What a payload filter reads: the members of a delivery's body it may name, from the event's served
-- document (its `details` parsed, as the body carries it; `{}` for a value that is no object, as the body
-- does). One expression, IMMUTABLE, so the planner inlines it where fan-out and replays use it.
CREATE FUNCTION audit_webhook_payload(document text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'type', d->'action',
    'actor', jsonb_build_object('user_id', d->'user_id', 'user_role', d->'user_role'),
    'resource', jsonb_build_object('type', d->'resource_type', 'id', d->'resource_id'),
    'phi_involved', d->'phi_involved',
    'success', d->'success',
    'details', CASE WHEN d->>'details' LIKE '{%' THEN (d->>'details')::jsonb ELSE '{}'::jsonb END)
  FROM (SELECT document::jsonb AS d) AS parsed
$$;
