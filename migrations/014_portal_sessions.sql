-- Customer portal sessions (docs/portal.md). A platform's backend mints one with a key holding
-- portal:sessions; its link carries a single-use token that the browser exchanges once for the session.
-- Only HMACs of the link and browser secrets are stored, under the server pepper, as for API keys.
CREATE TABLE portal_sessions (
  id            text        PRIMARY KEY CHECK (id ~ '^pss_[0-9a-f]{32}$'),
  tenant_id     text        NOT NULL,
  -- A subset of the minting key's scopes; the key's current scopes still bound it on every request.
  capabilities  text[]      NOT NULL,
  minted_by     text        NOT NULL REFERENCES api_keys (lookup_id),
  link_hash     bytea       NOT NULL,
  -- Set by the exchange: the secret of the browser's cookie, which lets a reload of the page resume.
  browser_hash  bytea,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL CHECK (expires_at > created_at),
  link_used_at  timestamptz,
  ended_at      timestamptz,
  CHECK ((link_used_at IS NULL) = (browser_hash IS NULL))
);

CREATE INDEX portal_sessions_by_tenant ON portal_sessions (tenant_id, created_at);
