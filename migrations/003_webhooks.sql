-- Webhook endpoints (docs/webhooks.md). The signing secret is stored encrypted (AES-256-GCM under
-- SECRET_ENCRYPTION_KEY); the database alone cannot sign a delivery.
CREATE TABLE webhook_endpoints (
  id                   text        PRIMARY KEY CHECK (id ~ '^wh_[0-9a-f]{32}$'),
  tenant_id            text        NOT NULL,
  url                  text        NOT NULL,
  event_filter         text[]      NOT NULL DEFAULT '{}',
  description          text        NOT NULL DEFAULT '',
  secret_ciphertext    bytea       NOT NULL,
  active               boolean     NOT NULL DEFAULT true,
  disabled_reason      text        CHECK (disabled_reason IN ('manual', 'auto')),
  consecutive_failures integer     NOT NULL DEFAULT 0,
  last_delivery_at     timestamptz,
  -- Set when a Kubernetes WebhookEndpoint resource owns the endpoint: REST may not disable or delete it.
  managed_by           text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  disabled_at          timestamptz,
  CHECK (active = (disabled_reason IS NULL))
);

CREATE INDEX webhook_endpoints_by_tenant ON webhook_endpoints (tenant_id, created_at);
-- Fan-out looks up a tenant's active endpoints for every batch of events written.
CREATE INDEX webhook_endpoints_active ON webhook_endpoints (tenant_id) WHERE active;

-- One delivery per event × matching endpoint, recorded in the transaction that writes the event. The row is
-- also the outbox entry and the retry schedule: the relay publishes rows that are due and unpublished; a
-- worker records each attempt and either finishes the row or makes it due again later.
CREATE TABLE deliveries (
  id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id       text        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  tenant_id         text        NOT NULL,
  event_id          uuid        NOT NULL,
  event_occurred_at timestamptz NOT NULL,
  state             text        NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'succeeded', 'failed', 'cancelled')),
  -- Attempts made so far; the next one is attempts + 1.
  attempts          integer     NOT NULL DEFAULT 0,
  due_at            timestamptz NOT NULL DEFAULT now(),
  -- When the relay handed the next attempt to JetStream; NULL while it waits for its due time.
  published_at      timestamptz,
  -- Times the row was published; part of the message id, so that a deferred attempt published again is
  -- not dropped by JetStream's duplicate detection as a copy of its first publication.
  publications      integer     NOT NULL DEFAULT 0,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz,
  UNIQUE (endpoint_id, event_id)
);

-- The relay's queue: pending rows waiting to be published, oldest due first.
CREATE INDEX deliveries_due ON deliveries (due_at, id) WHERE state = 'pending' AND published_at IS NULL;
-- Published rows whose message may have been lost (a purged stream) are found and republished.
CREATE INDEX deliveries_in_flight ON deliveries (published_at) WHERE state = 'pending' AND published_at IS NOT NULL;
-- Lookups by endpoint (disable, delete) use the unique (endpoint_id, event_id) index; every other index
-- here costs each delivery's two updates.

CREATE TABLE delivery_attempts (
  delivery_id      bigint      NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  attempt          integer     NOT NULL,
  attempted_at     timestamptz NOT NULL,
  duration_ms      integer     NOT NULL,
  -- The HTTP status, or NULL when no response arrived (then error says why).
  status_code      integer,
  error            text,
  -- At most 1 KiB of the response body, for the person debugging their receiver.
  response_excerpt text        NOT NULL DEFAULT '',
  PRIMARY KEY (delivery_id, attempt)
);
