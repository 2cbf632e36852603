-- Log streams (docs/streams.md): the OCSF release of an `ocsf` stream's records, and a fifth destination,
-- an AMQP 0-9-1 broker (RabbitMQ).
--
-- `ocsf_version` is set exactly for `ocsf` streams. Streams that already send OCSF keep the release they were
-- made with (1.3.0): a consumer parsing them must not meet another one unannounced. New ones default to 1.7.0
-- in the API and the AuditLogStream resource.

ALTER TABLE log_streams ADD COLUMN ocsf_version text CHECK (ocsf_version IN ('1.3.0', '1.7.0'));
UPDATE log_streams SET ocsf_version = '1.3.0' WHERE format = 'ocsf';
ALTER TABLE log_streams ADD CONSTRAINT log_streams_ocsf_version_with_format CHECK ((format = 'ocsf') = (ocsf_version IS NOT NULL));

ALTER TABLE log_streams DROP CONSTRAINT log_streams_destination_type_check;
ALTER TABLE log_streams ADD CONSTRAINT log_streams_destination_type_check
  CHECK (destination_type IN ('splunk_hec', 'datadog', 'https', 's3', 'amqp'));
