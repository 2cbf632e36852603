/**
 * An endpoint's settings, changed in place (PATCH /audit/webhooks/{id}, docs/webhooks.md "Changing an
 * endpoint"): filters, custom headers (their values are never shown: a header is set again or removed),
 * time limit, retry schedule, rate limit, ordering and signatures. Only what was changed is sent; the
 * service's 422 names the field, a payload filter's problem its place in the filter.
 */
import type { PortalApi } from '../api.ts';
import type { PayloadFilter, WebhookEndpoint } from '../types.ts';
import { ErrorNotice, Modal, useAction } from '../ui.tsx';

const list = (text: string) =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');

/** A number field: empty is the service's default (null). */
const numberOrNull = (text: string) => (text.trim() === '' ? null : Number(text));

/** The change a submitted form asks for: the fields whose value differs from the endpoint's. */
function changesOf(endpoint: WebhookEndpoint, data: FormData): Record<string, unknown> {
  const text = (name: string) => String(data.get(name) ?? '');
  const changes: Record<string, unknown> = {};
  const set = (name: string, value: unknown, current: unknown) => {
    if (JSON.stringify(value) !== JSON.stringify(current)) changes[name] = value;
  };
  set('event_filter', list(text('event_filter')), endpoint.event_filter);
  set('description', text('description'), endpoint.description);
  const filterText = text('payload_filter').trim();
  // Not JSON: sent as it is, for the service to say what is wrong with it.
  let filter: unknown = filterText === '' ? null : filterText;
  try {
    filter = filterText === '' ? null : JSON.parse(filterText);
  } catch {}
  set('payload_filter', filter, endpoint.payload_filter);
  set('timeout_s', numberOrNull(text('timeout_s')), endpoint.timeout_s);
  const schedule = text('retry_schedule_s').trim();
  set('retry_schedule_s', schedule === '' ? null : list(schedule).map(Number), endpoint.retry_schedule_s);
  set('rate_limit_per_s', numberOrNull(text('rate_limit_per_s')), endpoint.rate_limit_per_s);
  set('ordered', data.get('ordered') === 'on', endpoint.ordered);
  set(
    'signature_schemes',
    ['hmac', 'ed25519'].filter((scheme) => data.get(`scheme_${scheme}`) === 'on'),
    endpoint.signature_schemes,
  );
  const headers: Record<string, string | null> = {};
  for (const name of endpoint.header_names) if (data.get(`remove_${name}`) === 'on') headers[name] = null;
  for (const line of text('new_headers').split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  if (Object.keys(headers).length > 0) changes.headers = headers;
  return changes;
}

export function EndpointSettings(props: { api: PortalApi; endpoint: WebhookEndpoint; onClose: () => void; onSaved: () => Promise<void> }) {
  const { endpoint } = props;
  const saving = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    const changes = changesOf(endpoint, new FormData(event.currentTarget as HTMLFormElement));
    void saving.run(async () => {
      if (Object.keys(changes).length > 0) await props.api.json('PATCH', `/audit/webhooks/${endpoint.id}`, { body: changes });
      await props.onSaved();
      props.onClose();
    });
  };
  return (
    <Modal title={`Settings of ${endpoint.url}`} onClose={props.onClose} labelId="settings-title">
      <form class="settings" onSubmit={submit}>
        <label>
          Actions (prefixes, comma-separated; empty for every {endpoint.kind === 'operational' ? 'notice' : 'event'})
          <input name="event_filter" defaultValue={endpoint.event_filter.join(', ')} autocomplete="off" />
        </label>
        <label>
          Description
          <input name="description" maxLength={500} defaultValue={endpoint.description} autocomplete="off" />
        </label>
        <label>
          Payload filter (JSON; empty for none), e.g. {'{"path": "details.ward", "in": ["3B", "4C"]}'}
          <textarea
            name="payload_filter"
            rows={4}
            defaultValue={endpoint.payload_filter ? JSON.stringify(endpoint.payload_filter, null, 2) : ''}
          />
        </label>
        <fieldset>
          <legend>Custom headers (values are never shown)</legend>
          {endpoint.header_names.map((name) => (
            <label key={name} class="inline">
              <input type="checkbox" name={`remove_${name}`} /> Remove <span class="url">{name}</span>
            </label>
          ))}
          <label>
            Set headers, one "Name: value" a line (replaces a header of that name)
            <textarea name="new_headers" rows={2} autocomplete="off" />
          </label>
        </fieldset>
        <label>
          Time limit (seconds, 1 to 30; empty for the default, 10)
          <input name="timeout_s" type="number" min={1} max={30} defaultValue={endpoint.timeout_s ?? ''} />
        </label>
        <label>
          Retry delays (seconds, comma-separated; empty for the default schedule)
          <input name="retry_schedule_s" defaultValue={endpoint.retry_schedule_s?.join(', ') ?? ''} autocomplete="off" />
        </label>
        <label>
          Rate limit (deliveries a second; empty for none)
          <input name="rate_limit_per_s" type="number" min={1} max={1000} defaultValue={endpoint.rate_limit_per_s ?? ''} />
        </label>
        <label class="inline">
          <input type="checkbox" name="ordered" defaultChecked={endpoint.ordered} /> Ordered: one delivery at a time, in order
        </label>
        <fieldset>
          <legend>Signatures</legend>
          <label class="inline">
            <input type="checkbox" name="scheme_hmac" defaultChecked={endpoint.signature_schemes.includes('hmac')} /> HMAC (v1)
          </label>
          <label class="inline">
            <input type="checkbox" name="scheme_ed25519" defaultChecked={endpoint.signature_schemes.includes('ed25519')} /> Ed25519 (v1a)
          </label>
          {endpoint.public_key && (
            <p>
              Public key: <code data-testid="public-key">{endpoint.public_key}</code>
            </p>
          )}
        </fieldset>
        <button type="submit" disabled={saving.busy}>
          Save settings
        </button>
        <ErrorNotice error={saving.error} />
      </form>
    </Modal>
  );
}

/** The payload filter an endpoint's deliveries pass, in the delivery log: events it leaves out have no delivery. */
export function PayloadFilterNote(props: { filter: PayloadFilter | null }) {
  if (!props.filter) return null;
  return (
    <p class="notice">
      Only events whose body meets this payload filter are delivered (the others have no delivery):{' '}
      <code>{JSON.stringify(props.filter)}</code>
    </p>
  );
}
