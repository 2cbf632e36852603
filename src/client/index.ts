// The entry of the customer package (@audit-trail/client, packages/client): the API client and the webhook
// verifier. Everything here runs on Node's own modules; nothing in src/client imports the service.
export { AUDIT_EVENT_FIELDS, type AuditEvent, type AuditEventField, type AuditEventFieldName } from './auditEvent.ts';
export {
  AuditTrailApiError,
  AuditTrailClient,
  AuditTrailUnreachableError,
  type ClientOptions,
  type EventFilters,
  type EventPage,
} from './auditTrailClient.ts';
export { serverSentEvents, type LiveOptions, type ServerSentEvent } from './liveEvents.ts';
export type * from './portalShapes.ts';
export type * from './webhookShapes.ts';
export type { CreatedLogStream, LogStream, StreamCreation, StreamDestination, StreamFilter, StreamTestResult } from './logStreams.ts';
export {
  DEFAULT_SIGNATURE_TOLERANCE_S,
  standardWebhooksSecretOf,
  verifyStandardWebhook,
  verifyWebhookSignature,
  type StandardWebhookHeaders,
  type VerificationFailure,
  type VerificationResult,
  type VerifyOptions,
} from './webhookSignature.ts';
export {
  canonicalJson,
  eventFromExportLine,
  eventLeafHash,
  keyIdOf,
  treeHeadSigningInput,
  verifyConsistency,
  verifyInclusion,
  verifyTreeHead,
  type ConsistencyProof,
  type InclusionProof,
  type SignedTreeHead,
  type TreeSummary,
  type TrustedKey,
  type Verification,
} from './integrity.ts';
export {
  verifyExport,
  type ExpiredLeafReport,
  type ExportFailure,
  type ExportVerificationInput,
  type ExportVerificationReport,
  type RedactedEventReport,
} from './exportVerifier.ts';
export { REDACTION_MARKER, redactionClaim, type RedactionClaim } from './redactedEvents.ts';
export {
  verifyStreamCopy,
  type StreamCopyFailure,
  type StreamCopyInput,
  type StreamCopyReport,
  type TenantCopyReport,
} from './streamCopyVerifier.ts';
