-- Which publication of a delivery JetStream has acknowledged (issue 28, item 9). A delivery marked published
-- (deliveries.publications = n) whose publication n is not confirmed here within the publish timeout and a
-- margin never reached the stream: its publisher died, or lost Postgres, between marking and publishing.
-- The relays' sweep makes such deliveries due again at once, whatever holds the consumer's ack floor back
-- (delivery/publicationConfirmations.ts). Nullable and without a default: adding it rewrites nothing.
ALTER TABLE deliveries ADD COLUMN confirmed_publication integer;
