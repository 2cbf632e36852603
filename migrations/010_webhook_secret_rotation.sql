-- Signing-secret rotation with overlap (docs/webhooks.md "Rotating the signing secret"): after a rotation
-- the secret it replaced keeps signing, beside the new one, until previous_secret_expires_at; after that it
-- never signs again. Only one previous secret is kept, so at most two are ever valid: rotating again
-- during an overlap overwrites (retires) the oldest at once.
ALTER TABLE webhook_endpoints
  ADD COLUMN previous_secret_ciphertext bytea,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD CONSTRAINT webhook_endpoints_previous_secret_complete
    CHECK ((previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL));
