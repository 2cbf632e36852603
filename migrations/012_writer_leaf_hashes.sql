-- Leaf hashes from the write path (docs/integrity.md "How events are sealed"). The sealer used to read every
-- queued event back by primary key and hash its document: most of its cost, and on a machine whose cores
-- ingestion fills, CPU taken from ingestion. The write path has just rendered the document; it hashes it
-- there, and the hash travels to the sealer in the queue row, so sealing reads queue rows only.

-- SHA-256(0x00 ‖ the RFC 8785 canonical JSON of `document`), as the writer computed it. NULL for rows whose
-- writer gave none: rows stored before this migration, rows of a pod of the previous release during a
-- rolling upgrade, rows inserted by hand. The sealer computes those from the document, as before. It is the
-- writer's claim, not evidence: `audit-trail integrity check` recomputes every leaf from the document as
-- served and names an event whose leaf disagrees, whoever computed it. Adding a nullable column without a
-- default rewrites nothing. (No CHECK of its length: validating one would read every partition; the seal
-- queue's trigger takes only hashes of 32 bytes, and the sealer computes the others.)
ALTER TABLE events ADD COLUMN leaf_hash bytea;

-- The leaf hashes of a queue row's events, concatenated in the order of event_ids: 32 bytes each. NULL
-- when any of them lacks one (then the sealer reads the row's events back, as for the rows queued before
-- this migration, which all have NULL). One bytea rather than an array: no per-element header, and it
-- arrives in the sealer as one buffer. Hashes do not compress.
ALTER TABLE seal_queue ADD COLUMN leaf_hashes bytea CHECK (octet_length(leaf_hashes) = 32 * event_count);
ALTER TABLE seal_queue ALTER COLUMN leaf_hashes SET STORAGE EXTERNAL;

-- As in 008, plus the hashes. Every aggregate of one group reads the group's rows in the same order, so
-- without ORDER BY too the hashes line up with event_ids (the bulk branch orders all three alike). A
-- group is all-or-nothing: a statement is one writer's, and a row whose hash has the wrong length is
-- sealed from its document.
CREATE OR REPLACE FUNCTION audit_enqueue_for_sealing() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT count(*) FROM stored_events) <= 5000 THEN
    INSERT INTO seal_queue (tenant_id, ingested_at, min_occurred_at, max_occurred_at, event_count, event_occurred_at, event_ids, leaf_hashes)
    SELECT tenant_id, ingested_at, min(occurred_at), max(occurred_at), count(*), array_agg(occurred_at), array_agg(event_id),
           CASE WHEN count(*) FILTER (WHERE octet_length(leaf_hash) = 32) = count(*) THEN string_agg(leaf_hash, ''::bytea) END
      FROM stored_events GROUP BY tenant_id, ingested_at;
  ELSE
    INSERT INTO seal_queue (tenant_id, ingested_at, min_occurred_at, max_occurred_at, event_count, event_occurred_at, event_ids, leaf_hashes)
    SELECT tenant_id, ingested_at, min(occurred_at), max(occurred_at), count(*),
           array_agg(occurred_at ORDER BY occurred_at, event_id), array_agg(event_id ORDER BY occurred_at, event_id),
           CASE WHEN count(*) FILTER (WHERE octet_length(leaf_hash) = 32) = count(*) THEN string_agg(leaf_hash, ''::bytea ORDER BY occurred_at, event_id) END
      FROM (SELECT tenant_id, ingested_at, occurred_at, event_id, leaf_hash,
                   (row_number() OVER (PARTITION BY tenant_id, ingested_at ORDER BY occurred_at, event_id) - 1) / 1000 AS chunk
              FROM stored_events) numbered
     GROUP BY tenant_id, ingested_at, chunk
     ORDER BY tenant_id, ingested_at, chunk;
  END IF;
  RETURN NULL;
END;
$$;
