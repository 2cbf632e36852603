// The package's public entry: what customers import.
export {
  AuditTrailApiError,
  AuditTrailClient,
  type AuditEvent,
  type ClientOptions,
  type EventFilters,
  type EventPage,
  type WebhookEndpoint,
} from './client/auditTrailClient.ts';
export {
  DEFAULT_SIGNATURE_TOLERANCE_S,
  verifyWebhookSignature,
  type VerificationFailure,
  type VerificationResult,
  type VerifyOptions,
} from './webhooks/signature.ts';
