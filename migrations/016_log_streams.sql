-- Log streams (docs/streams.md): a tenant's whole trail, or a filtered part of it, delivered in order and in
-- batches to a SIEM (Splunk HEC, Datadog, an HTTPS collector, S3). The trail is the buffer: a stream keeps
-- only its position in each tenant's sealed leaf order, so it can be paused for a month, or its destination
-- be down for a week, and lose nothing.

CREATE TABLE log_streams (
  id                     text        PRIMARY KEY CHECK (id ~ '^str_[0-9a-f]{32}$'),
  -- The tenant that manages the stream through the API; null for a deployment-wide stream, which an
  -- AuditLogStream resource declares (managed_by names it).
  owner_tenant_id        text,
  -- The tenants whose trails the stream follows; null: every tenant of the deployment.
  tenant_ids             text[]      CHECK (tenant_ids IS NULL OR cardinality(tenant_ids) > 0),
  destination_type       text        NOT NULL CHECK (destination_type IN ('splunk_hec', 'datadog', 'https', 's3')),
  -- The destination as the API shows it: everything but its secrets.
  destination            jsonb       NOT NULL,
  -- The secrets (HEC token, Datadog API key, S3 secret access key, the https signing secret) as one JSON
  -- object sealed with SECRET_ENCRYPTION_KEY (webhooks/secretBox.ts). Never returned, never logged.
  secret_ciphertext      bytea       NOT NULL,
  format                 text        NOT NULL CHECK (format IN ('native', 'ocsf')),
  filter_action_prefixes text[]      NOT NULL DEFAULT '{}',
  filter_phi_involved    boolean,
  tree_heads             boolean     NOT NULL DEFAULT true,
  -- Where a tenant's delivery starts when the stream first meets it: the first leaf of the first statement
  -- ingested, or of the first event dated, at or after this instant (docs/streams.md "Starting point").
  start_at               timestamptz NOT NULL,
  paused                 boolean     NOT NULL DEFAULT false,
  -- Set when the destination refused a batch in a way retrying does not heal (401, 403, 404...); cleared
  -- by the next batch it accepts.
  failing_since          timestamptz,
  last_error             text,
  last_error_at          timestamptz,
  last_delivered_at      timestamptz,
  created_at             timestamptz NOT NULL DEFAULT now(),
  managed_by             text,
  -- The streams-role process that delivers the stream, and until when it may (it renews while it runs):
  -- another process takes the stream over once the lease has run out.
  lease_owner            text,
  lease_until            timestamptz,
  -- Raised by every change a running stream must see (a new destination, a resume): its process reloads it.
  revision               integer     NOT NULL DEFAULT 1,
  CHECK (owner_tenant_id IS NOT NULL OR managed_by IS NOT NULL),
  CHECK (owner_tenant_id IS NULL OR tenant_ids = ARRAY[owner_tenant_id])
);
CREATE INDEX log_streams_by_owner ON log_streams (owner_tenant_id, created_at) WHERE owner_tenant_id IS NOT NULL;
CREATE UNIQUE INDEX log_streams_by_resource ON log_streams (managed_by) WHERE managed_by IS NOT NULL;

-- A stream's position in each tenant's trail: the next leaf to deliver. Every leaf before it was delivered
-- (or filtered out); the batch in flight when a process dies is the only one that can be sent again.
CREATE TABLE log_stream_positions (
  stream_id        text        NOT NULL REFERENCES log_streams (id) ON DELETE CASCADE,
  tenant_id        text        NOT NULL,
  next_leaf        bigint      NOT NULL CHECK (next_leaf >= 0),
  delivered_events bigint      NOT NULL DEFAULT 0,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream_id, tenant_id)
);
