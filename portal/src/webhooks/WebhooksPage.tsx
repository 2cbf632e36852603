/**
 * The tenant's webhook endpoints (docs/webhooks.md): their state and failures for every session; creating,
 * changing settings, testing, rotating, disabling, enabling again and deleting with webhooks:write, whose
 * controls are absent otherwise; and the operational events.
 */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import type { PortalSession, TestResult, WebhookEndpoint } from '../types.ts';
import { CopyButton, ErrorNotice, Modal, OnceSecret, Time, useAction } from '../ui.tsx';
import { EndpointHealth } from './EndpointHealth.tsx';
import { DeliveryLog } from './DeliveryLog.tsx';
import { EndpointSettings } from './EndpointSettings.tsx';
import { OperationalEvents } from './OperationalEvents.tsx';

interface Registered {
  readonly endpoint: WebhookEndpoint;
  readonly secret: string;
}

const filterList = (text: string) =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);

export function WebhooksPage(props: { api: PortalApi; session: PortalSession }) {
  const { api } = props;
  const canWrite = props.session.capabilities.includes('webhooks:write');
  const [endpoints, setEndpoints] = useState<WebhookEndpoint[] | undefined>();
  const [shownSecret, setShownSecret] = useState<{ title: string; secret: string } | undefined>();
  const [logOf, setLogOf] = useState<WebhookEndpoint | undefined>();
  const [settingsOf, setSettingsOf] = useState<WebhookEndpoint | undefined>();
  const loading = useAction();

  // Counted up at each reload, so that each endpoint's health is read again with it.
  const [refreshed, setRefreshed] = useState(0);
  const reload = () =>
    loading.run(async () => {
      setEndpoints((await api.json<{ endpoints: WebhookEndpoint[] }>('GET', '/audit/webhooks')).endpoints);
      setRefreshed((count) => count + 1);
    });
  useEffect(() => void reload(), []);

  const register = async (body: { url: string; event_filter: string[]; description: string; kind: string }, title: string) => {
    const registered = await api.json<Registered>('POST', '/audit/webhooks', { body });
    setShownSecret({ title, secret: registered.secret });
    await reload();
  };

  return (
    <section aria-labelledby="webhooks-title">
      <h1 id="webhooks-title">Webhooks</h1>
      <ErrorNotice error={loading.error} />
      {endpoints && endpoints.length === 0 && <p class="empty">No webhook endpoints yet.</p>}
      {endpoints && endpoints.length > 0 && (
        <table class="endpoints cards">
          <caption class="visually-hidden">Webhook endpoints</caption>
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Filter</th>
              <th scope="col">State</th>
              <th scope="col">Health</th>
              <th scope="col">Last delivery</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {endpoints.map((endpoint) => (
              <EndpointRow
                key={endpoint.id}
                api={api}
                endpoint={endpoint}
                canWrite={canWrite}
                onChanged={reload}
                onSecret={(title, secret) => setShownSecret({ title, secret })}
                onShowLog={() => setLogOf(endpoint)}
                onShowSettings={() => setSettingsOf(endpoint)}
                refreshed={refreshed}
              />
            ))}
          </tbody>
        </table>
      )}
      {canWrite && <CreateEndpoint onCreate={(body) => register(body, 'Endpoint created')} />}
      {logOf && <DeliveryLog api={api} endpoint={logOf} canWrite={canWrite} onClose={() => setLogOf(undefined)} />}
      {settingsOf && <EndpointSettings api={api} endpoint={settingsOf} onClose={() => setSettingsOf(undefined)} onSaved={reload} />}
      <OperationalEvents api={api} />
      {shownSecret && (
        <Modal title={shownSecret.title} onClose={() => setShownSecret(undefined)}>
          <OnceSecret label="Signing secret." secret={shownSecret.secret} />
        </Modal>
      )}
    </section>
  );
}

function CreateEndpoint(props: {
  onCreate: (body: { url: string; event_filter: string[]; description: string; kind: string }) => Promise<void>;
}) {
  const creating = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    void creating.run(async () => {
      await props.onCreate({
        url: String(data.get('url') ?? ''),
        event_filter: filterList(String(data.get('event_filter') ?? '')),
        description: String(data.get('description') ?? ''),
        kind: data.get('operational') === 'on' ? 'operational' : 'events',
      });
      form.reset();
    });
  };
  return (
    <form class="create" onSubmit={submit} aria-labelledby="create-title">
      <h2 id="create-title">New endpoint</h2>
      <label>
        URL
        <input name="url" type="url" required placeholder="https://siem.example.com/audit-hook" />
      </label>
      <label>
        Actions (prefixes, comma-separated; empty for every event)
        <input name="event_filter" placeholder="phi., admin." autocomplete="off" />
      </label>
      <label>
        Description
        <input name="description" maxLength={500} autocomplete="off" />
      </label>
      <label class="inline">
        <input type="checkbox" name="operational" /> Operational: receives notices about your endpoints and streams, not events
      </label>
      <button type="submit" disabled={creating.busy}>
        Create endpoint
      </button>
      <ErrorNotice error={creating.error} />
    </form>
  );
}

type Confirming = 'delete' | 'rotate' | undefined;

function EndpointRow(props: {
  api: PortalApi;
  endpoint: WebhookEndpoint;
  canWrite: boolean;
  onChanged: () => Promise<void>;
  onSecret: (title: string, secret: string) => void;
  onShowLog: () => void;
  onShowSettings: () => void;
  refreshed: number;
}) {
  const { api, endpoint } = props;
  const path = `/audit/webhooks/${endpoint.id}`;
  const [confirming, setConfirming] = useState<Confirming>();
  const [test, setTest] = useState<TestResult | undefined>();
  const action = useAction();
  const act = (work: () => Promise<void>) => action.run(work);

  return (
    <tr data-endpoint-id={endpoint.id}>
      <td data-label="Endpoint">
        <span class="url">{endpoint.url}</span>{' '}
        <CopyButton value={endpoint.id} label={`Copy id of the endpoint ${endpoint.url}`}>
          Copy id
        </CopyButton>
        <span class="muted">{endpoint.description}</span>
        {endpoint.kind === 'operational' && <span class="muted">Operational notices</span>}
      </td>
      <td data-label="Filter">
        {endpoint.event_filter.length === 0 ? 'Every event' : endpoint.event_filter.join(', ')}
        {endpoint.payload_filter && <span class="muted">and a payload filter</span>}
      </td>
      <td data-label="State">{endpoint.active ? 'Active' : 'Disabled'}</td>
      <td data-label="Health">
        <EndpointHealth api={api} endpointId={endpoint.id} refreshed={props.refreshed} />
      </td>
      <td data-label="Last delivery">
        <Time value={endpoint.last_delivery_at} />
      </td>
      <td class="actions row-actions">
        <div class="buttons">
          <button type="button" class="secondary" onClick={props.onShowLog}>
            Deliveries
          </button>
          {props.canWrite && (
            <button type="button" class="secondary" onClick={props.onShowSettings}>
              Settings
            </button>
          )}
          {props.canWrite && endpoint.active && (
            <>
              <button
                type="button"
                class="secondary"
                disabled={action.busy}
                onClick={() => act(async () => setTest(await api.json<TestResult>('POST', `${path}/test`)))}
              >
                Send test
              </button>
              <button type="button" class="secondary" onClick={() => setConfirming('rotate')}>
                Rotate secret
              </button>
              <button
                type="button"
                class="secondary"
                disabled={action.busy}
                onClick={() =>
                  act(async () => {
                    await api.json('POST', `${path}/disable`);
                    await props.onChanged();
                  })
                }
              >
                Disable
              </button>
            </>
          )}
          {props.canWrite && !endpoint.active && (
            <button
              type="button"
              class="secondary"
              disabled={action.busy}
              onClick={() =>
                act(async () => {
                  await api.json('POST', `${path}/enable`);
                  await props.onChanged();
                })
              }
              title="The same endpoint, id and secret, its failure count at 0. Deliveries cancelled when it was disabled stay cancelled: replay the period to deliver them."
            >
              Enable again
            </button>
          )}
          {props.canWrite && (
            <button type="button" class="danger" onClick={() => setConfirming('delete')}>
              Delete
            </button>
          )}
        </div>
        {test && (
          <span role="status" class={test.success ? 'ok' : 'bad'}>
            {test.success
              ? `Test delivered: ${test.status_code} in ${test.duration_ms} ms`
              : `Test failed: ${test.error ?? `status ${test.status_code}`} after ${test.duration_ms} ms`}
          </span>
        )}
        <ErrorNotice error={action.error} />
        {confirming === 'delete' && (
          <Modal title="Delete this endpoint?" onClose={() => setConfirming(undefined)}>
            <p>
              Deliveries to <span class="url">{endpoint.url}</span> stop, and its delivery history is deleted with it.
            </p>
            <button
              type="button"
              class="danger"
              onClick={() =>
                act(async () => {
                  await api.json('DELETE', path);
                  setConfirming(undefined);
                  await props.onChanged();
                })
              }
            >
              Delete endpoint
            </button>
          </Modal>
        )}
        {confirming === 'rotate' && (
          <RotateSecret
            overlapEnds={endpoint.previous_secret_expires_at}
            onClose={() => setConfirming(undefined)}
            onRotate={async (overlapS) => {
              const rotated = await api.json<{ secret: string }>('POST', `${path}/rotate-secret`, { body: { overlap_s: overlapS } });
              setConfirming(undefined);
              props.onSecret('Secret rotated', rotated.secret);
              await props.onChanged();
            }}
          />
        )}
      </td>
    </tr>
  );
}

function RotateSecret(props: { overlapEnds: string | null; onClose: () => void; onRotate: (overlapS: number) => Promise<void> }) {
  const rotating = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    const overlap = Number(new FormData(event.currentTarget as HTMLFormElement).get('overlap_s'));
    void rotating.run(() => props.onRotate(overlap));
  };
  return (
    <Modal title="Rotate the signing secret" onClose={props.onClose}>
      <form onSubmit={submit}>
        <p>The old secret keeps signing beside the new one during the overlap, so receivers can switch without missing a delivery.</p>
        {props.overlapEnds && (
          <p class="warning" role="alert">
            The secret replaced by the last rotation still signs until <Time value={props.overlapEnds} />. An endpoint signs with two
            secrets at most: rotating now ends that overlap at once, and receivers still verifying with it start failing.
          </p>
        )}
        <label>
          Overlap (seconds, at most a week)
          <input name="overlap_s" type="number" min={0} max={604800} defaultValue="86400" required />
        </label>
        <button type="submit" disabled={rotating.busy}>
          Rotate secret
        </button>
        <ErrorNotice error={rotating.error} />
      </form>
    </Modal>
  );
}
