-- API keys: only an HMAC of the secret under the server pepper is stored (docs/api.md). The lookup id is
-- the 8-hex segment the customer sees; environment is live or test.
CREATE TABLE api_keys (
  lookup_id     text        PRIMARY KEY CHECK (lookup_id ~ '^[0-9a-f]{8}$'),
  environment   text        NOT NULL CHECK (environment IN ('live', 'test')),
  secret_hash   bytea       NOT NULL,
  tenant_id     text        NOT NULL,
  scopes        text[]      NOT NULL,
  allowed_cidrs text[]      NOT NULL DEFAULT '{}',
  description   text        NOT NULL DEFAULT '',
  -- Set when a Kubernetes ApiKey resource owns the key: only the controller may change it then.
  managed_by    text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);

CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);

-- Revocation must reach every api instance within seconds: they LISTEN on this channel and drop the key
-- from their caches.
CREATE FUNCTION audit_notify_api_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('audit_api_key_changed', COALESCE(NEW.lookup_id, OLD.lookup_id));
  RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_notify
  AFTER INSERT OR UPDATE OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION audit_notify_api_key_change();
