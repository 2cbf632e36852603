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
