-- One database is one deployment. Its identity is generated here, once, by the first `migrate`, and never
-- changes afterwards. Two releases that share infrastructure (a NATS account, a Kubernetes cluster) tell
-- their own work from the other's by it: the default JetStream namespace of the internal delivery stream
-- is derived from it, and the Kubernetes controller stamps the resources it reconciles with it.
--
-- A database cloned to start a second deployment (staging from a production copy) carries the same
-- identity; docs/operations.md says to give such a copy its own NATS_NAMESPACE and controller class.
CREATE TABLE audit_deployment (
  singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
  deployment_id text        NOT NULL CHECK (deployment_id ~ '^[a-z0-9]{12}$'),
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- 48 random bits from a version-4 UUID (its first twelve hex digits are all random).
INSERT INTO audit_deployment (deployment_id) VALUES (substr(replace(gen_random_uuid()::text, '-', ''), 1, 12));
