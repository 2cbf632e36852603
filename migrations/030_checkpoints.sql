-- Checkpoints (docs/integrity.md "Checkpoints and tiles"): every signed tree head is also a C2SP
-- tlog-checkpoint, a signed note whose first line, the origin, names the deployment and the tenant. The
-- sealer signs the note with SEAL_SIGNING_KEY when it signs the JSON head, and the API serves both; the
-- API holds no key, so the note's signature is kept beside the head's.

-- The tenant's log's origin, fixed by the first checkpoint signed for it: a log's name never changes, even
-- when CHECKPOINT_ORIGIN does later (a new name would be a new log to every witness).
ALTER TABLE merkle_trees ADD COLUMN checkpoint_origin text CHECK (checkpoint_origin !~ '[[:space:]+]');

-- The Ed25519 signature of the checkpoint note of this head (origin, size, base64 root), by the head's key
-- under the name checkpoint_origin. NULL for heads signed before this migration: the sealer signs a
-- checkpoint for each tree at its next pass (a heartbeat of the same tree), so every tenant has one.
ALTER TABLE tree_heads ADD COLUMN note_signature bytea CHECK (octet_length(note_signature) = 64);
-- The latest head with a checkpoint, which GET /audit/integrity/checkpoint serves.
CREATE INDEX tree_heads_with_checkpoint ON tree_heads (tenant_id, signed_at DESC) WHERE note_signature IS NOT NULL;

-- Witnesses' cosignatures (tlog-cosignature/v1, Ed25519) of a tenant's checkpoints, posted by the tenant's
-- witnesses (audit-trail-client witness) and served with the checkpoint they sign. One per witness key and
-- tree size; the signature covers the checkpoint's text, so it verifies whichever head of that size and
-- root it is served with. Kept as evidence for as long as the heads are.
CREATE TABLE checkpoint_cosignatures (
  tenant_id     text        NOT NULL,
  tree_size     bigint      NOT NULL CHECK (tree_size > 0),
  root_hash     bytea       NOT NULL CHECK (length(root_hash) = 32),
  witness_name  text        NOT NULL CHECK (witness_name !~ '[[:space:]+]' AND witness_name <> ''),
  witness_key   text        NOT NULL,
  cosigned_at   timestamptz NOT NULL,
  signature_line text       NOT NULL,
  received_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, tree_size, witness_key)
);

-- The fork guard (integrity/forkGuard.ts): a tenant whose database tree does not extend the latest head
-- signed for it (kept outside the database, in JetStream) is no longer sealed, and the sealer says why here,
-- where `audit-trail integrity check` reads it. Rows stay as the record of what happened; an operator's
-- resolution is written beside them (docs/integrity.md "The fork guard").
CREATE TABLE tree_forks (
  tenant_id       text        NOT NULL,
  detected_at     timestamptz NOT NULL DEFAULT now(),
  signed_size     bigint      NOT NULL,
  signed_root     bytea       NOT NULL,
  database_size   bigint      NOT NULL,
  database_root   bytea,
  reason          text        NOT NULL,
  PRIMARY KEY (tenant_id, detected_at)
);
