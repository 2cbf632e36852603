-- The last archive outcome of each tenant whose policy asks for an archive (docs/retention.md "Archive
-- before expiry"): written by the expiry pass, read by the controller, which shows a failing archive on the
-- RetentionPolicy (Ready=False, reason ArchiveFailing) until a later pass archives again. A status, not a
-- record: the tenant's trail (audit.retention.expire) keeps every pass's outcome.
CREATE TABLE expiry_archive_outcomes (
  tenant_id         text        PRIMARY KEY,
  last_failed_at    timestamptz,
  last_failure      text,
  last_succeeded_at timestamptz
);
