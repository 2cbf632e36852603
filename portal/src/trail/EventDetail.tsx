/** One event with every field, as text, and "verify this event" against the signed tree head. */
import { useEffect, useState } from 'preact/hooks';
import { AUDIT_EVENT_FIELDS } from '../../../src/client/auditEvent.ts';
import { ApiError, type PortalApi } from '../api.ts';
import type { AuditEvent, PortalSession } from '../types.ts';
import { CopyButton, ErrorNotice, Modal, Time, useAction } from '../ui.tsx';
import { verifyEvent, type Verification } from './verify.ts';

/** Fields holding JSON in a string are shown indented, still as text. */
function shown(value: unknown): string {
  if (typeof value !== 'string') return JSON.stringify(value);
  if (!/^[[{]/.test(value)) return value;
  try {
    return JSON.stringify(JSON.parse(value), null, 2);
  } catch {
    return value;
  }
}

/** The fields a person copies to look the event up elsewhere. */
const COPYABLE: ReadonlySet<string> = new Set(['event_id', 'user_id', 'resource_id']);

/** A field's value as text; the timestamp as the list shows it (the person's zone, named), then as stored. */
function FieldValue(props: { name: string; value: unknown }) {
  const { name, value } = props;
  if (name === 'timestamp' && typeof value === 'string') {
    return (
      <span class="timestamp">
        <Time value={value} /> <span class="muted">{value} as stored</span>
      </span>
    );
  }
  return (
    <>
      <pre>{shown(value)}</pre>
      {COPYABLE.has(name) && typeof value === 'string' && <CopyButton value={value} label={`Copy ${name}`} />}
    </>
  );
}

export function EventDetail(props: { api: PortalApi; session: PortalSession; eventId: string; onClose: () => void }) {
  const [event, setEvent] = useState<AuditEvent | undefined>();
  const [missing, setMissing] = useState(false);
  const [verification, setVerification] = useState<Verification | undefined>();
  const loading = useAction();
  const verifying = useAction();

  useEffect(() => {
    void loading.run(async () => {
      try {
        setEvent(await props.api.getEvent(props.eventId));
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) setMissing(true);
        else throw error;
      }
    });
  }, [props.eventId]);

  // Every field of the table in its order, then any the service added since.
  const names = event ? [...Object.keys(AUDIT_EVENT_FIELDS), ...Object.keys(event).filter((name) => !(name in AUDIT_EVENT_FIELDS))] : [];
  return (
    <Modal title="Event" onClose={props.onClose}>
      <ErrorNotice error={loading.error} />
      {missing && <p class="error">No such event in this trail.</p>}
      {event && (
        <>
          <dl class="fields">
            {names.map((name) => (
              <div key={name}>
                <dt>{name}</dt>
                <dd>
                  <FieldValue name={name} value={event[name]} />
                </dd>
              </div>
            ))}
          </dl>
          <div class="toolbar">
            <button
              type="button"
              disabled={verifying.busy}
              onClick={() =>
                verifying.run(async () => setVerification(await verifyEvent(props.api, props.eventId, props.session.tenant_id)))
              }
            >
              Verify this event
            </button>
          </div>
          <ErrorNotice error={verifying.error} />
          {verification && <VerificationReport verification={verification} />}
        </>
      )}
    </Modal>
  );
}

function VerificationReport(props: { verification: Verification }) {
  const { verification } = props;
  if (verification.state === 'not_sealed') {
    return (
      <p class="notice" role="status">
        {verification.message}
      </p>
    );
  }
  const proven = verification.state !== 'failed';
  const entry = `entry ${verification.leafIndex + 1} of the ${verification.head.tree_size} in this tenant's tamper-evident log, whose state the service signed at ${verification.head.timestamp}`;
  return (
    <section class={proven ? 'verified' : 'refuted'} aria-live="polite" data-testid="verification">
      <h3>
        {verification.state === 'redacted'
          ? 'Redacted: position and leaf proven, content not re-verifiable'
          : proven
            ? 'Verified in this browser'
            : 'Not verified'}
      </h3>
      <p>
        {verification.state === 'redacted'
          ? `Personal data in this event was redacted on request. The event is ${entry}, and has not been removed or reordered since; the redacted content itself can no longer be checked.`
          : proven
            ? `This event, exactly as shown, is ${entry}. It has not been changed, removed or reordered since.`
            : 'A check failed: what is shown here does not match what the service signed. Report it to the platform.'}
      </p>
      <ul class="checks">
        {verification.checks.map((check) => (
          <li key={check.label} class={check.ok ? 'ok' : 'bad'}>
            <strong>
              {check.ok ? '✓' : '✗'} {check.label}:
            </strong>{' '}
            {check.detail}
          </li>
        ))}
      </ul>
    </section>
  );
}
