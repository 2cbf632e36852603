/**
 * The fields of an audit event as the API sends them: the one definition of the event's shape. The service
 * derives from this table its zod schema and the OpenAPI component `AuditEvent`, and the field order of the
 * documents it stores and serves; this package derives the `AuditEvent` type from it. It is plain data,
 * so that the client keeps depending on nothing.
 *
 * The order of the keys is the order of the fields in every document the service writes, and documents
 * are kept as written: a field is never removed, renamed or moved (that would be a new major version of
 * the API). A new field goes at the end and comes with a new document version (docs/operations.md "Stored
 * event documents"); events stored before it do not carry it.
 */
export const AUDIT_EVENT_FIELDS = {
  event_id: { type: 'string', format: 'uuid', description: 'Stable; the id for the lookup.' },
  timestamp: { type: 'string', format: 'date-time', description: 'UTC, always YYYY-MM-DDTHH:mm:ss.SSSZ.' },
  action: { type: 'string', description: 'Dotted lowercase, e.g. phi.read, admin.key.create, audit.export.', example: 'phi.read' },
  user_id: { type: 'string', description: 'Who acted, inside the tenant.' },
  user_role: { type: 'string', description: 'The role of the user who acted.' },
  resource_type: { type: 'string', description: 'The kind of thing acted on.', example: 'patient_record' },
  resource_id: { type: 'string', description: 'The thing acted on.' },
  fields_accessed: { type: 'string', description: 'A JSON array in a string; "" for events without PHI.' },
  phi_involved: { type: 'boolean', description: 'Whether protected health information was involved.' },
  tenant_id: { type: 'string', description: "Always the caller's tenant." },
  source_ip: { type: 'string', description: 'Where the recorded action came from; "" when unknown.' },
  user_agent: { type: 'string', description: 'The user agent of the recorded action; "" when unknown.' },
  justification: { type: 'string', description: 'The reason given for a PHI access; "" when none.' },
  success: { type: 'boolean', description: 'false when the recorded action was denied or failed.' },
  details: { type: 'string', description: 'A JSON object in a string; "{}" when empty.' },
} as const satisfies Readonly<Record<string, AuditEventField>>;

/** One field of the table: its JSON type, and what the OpenAPI document says about it. */
export interface AuditEventField {
  readonly type: keyof JsonTypes;
  readonly format?: 'uuid' | 'date-time';
  readonly description: string;
  readonly example?: string;
}

/** The TypeScript type of each JSON type a field can have. */
export interface JsonTypes {
  string: string;
  boolean: boolean;
}

export type AuditEventFieldName = keyof typeof AUDIT_EVENT_FIELDS;

/**
 * What a redacted event carries (docs/retention.md "Redaction"): every field redacted so far (their values
 * are now "[redacted]"), the leaf hash the event was sealed with, which its inclusion proof proves, and
 * each redaction's fields, time and reference.
 */
export interface EventRedaction {
  fields: string[];
  leaf_hash: string;
  history: Array<{ fields: string[]; redacted_at: string; reference: string }>;
}

/** An event as the list, the lookup and the export return it; the service may add fields, so others are allowed. */
export type AuditEvent = { [Name in AuditEventFieldName]: JsonTypes[(typeof AUDIT_EVENT_FIELDS)[Name]['type']] } & {
  /** Only on a redacted event. */
  redaction?: EventRedaction;
  [extra: string]: unknown;
};
