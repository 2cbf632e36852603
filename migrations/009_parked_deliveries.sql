-- Parked deliveries (issue 16): a delivery whose endpoint has every slot of a worker busy (a receiver that
-- hangs) waits in state 'parked' instead of being deferred to a due time. A deferred delivery came back
-- through the relay, JetStream and a worker every few seconds, so a hung endpoint cost CPU in proportion to
-- its backlog; a parked one is left alone until a request to its endpoint finishes, which releases a few
-- (events/deliveryOutbox.ts, unparkDeliveries). A parked delivery is still waiting for its next attempt:
-- nothing about its attempts or due time changes.
--
-- Additive: code before this migration never writes 'parked', takes only 'pending' rows, and treats a
-- message for a parked delivery as stale. After a rollback to such code, parked deliveries wait until they
-- are made pending again (docs/operations.md, "A receiver that hangs").
--
-- NOT VALID: every existing row satisfies the stricter check it replaces, and validating would read the
-- whole table under this migration's lock.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
  CHECK (state IN ('pending', 'parked', 'succeeded', 'failed', 'cancelled')) NOT VALID;

-- Releasing an endpoint's oldest parked deliveries, and finding the endpoints that have any, read only
-- parked rows: the cost follows the number released (or of endpoints), never the size of a backlog.
CREATE INDEX deliveries_parked ON deliveries (endpoint_id, due_at, id) WHERE state = 'parked';
