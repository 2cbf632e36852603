/** An endpoint's delivery log with each delivery's attempts, manual retry and replay of a time range (docs/webhooks.md). */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import type { Delivery, DeliveryAttempt, DeliveryStatus, Replay, WebhookEndpoint } from '../types.ts';
import { ErrorNotice, Modal, Time, localInputToIso, useAction } from '../ui.tsx';
import { PayloadFilterNote } from './EndpointSettings.tsx';

const REPLAY_POLL_MS = 500;

export function DeliveryLog(props: { api: PortalApi; endpoint: WebhookEndpoint; canWrite: boolean; onClose: () => void }) {
  const { api, endpoint } = props;
  const base = `/audit/webhooks/${endpoint.id}`;
  const [status, setStatus] = useState<DeliveryStatus | ''>('');
  const [deliveries, setDeliveries] = useState<Delivery[] | undefined>();
  const [opened, setOpened] = useState<string | undefined>();
  const loading = useAction();

  const reload = () =>
    loading.run(async () => {
      const body = await api.json<{ deliveries: Delivery[] }>('GET', `${base}/deliveries`, { query: { status: status || undefined } });
      setDeliveries(body.deliveries);
    });
  useEffect(() => void reload(), [status]);

  return (
    <Modal title={`Deliveries to ${endpoint.url}`} onClose={props.onClose} labelId="log-title">
      <PayloadFilterNote filter={endpoint.payload_filter} />
      <div class="toolbar">
        <label>
          Status
          <select value={status} onChange={(event) => setStatus((event.currentTarget as HTMLSelectElement).value as DeliveryStatus | '')}>
            <option value="">All</option>
            <option value="pending">Pending</option>
            <option value="succeeded">Succeeded</option>
            <option value="failed">Failed</option>
          </select>
        </label>
        <button type="button" class="secondary" onClick={() => reload()} disabled={loading.busy}>
          Refresh
        </button>
      </div>
      <ErrorNotice error={loading.error} />
      {deliveries && deliveries.length === 0 && <p class="empty">No deliveries.</p>}
      {deliveries && deliveries.length > 0 && (
        <table class="deliveries">
          <caption class="visually-hidden">Deliveries, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Created</th>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last answer</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.map((delivery) => (
              <tr key={delivery.id} data-delivery-id={delivery.id}>
                <td>
                  <Time value={delivery.created_at} />
                </td>
                <td>{delivery.action ?? delivery.event_id}</td>
                <td>{delivery.status}</td>
                <td>{delivery.attempts}</td>
                <td>{delivery.last_status_code ?? delivery.last_error ?? '—'}</td>
                <td>
                  <button
                    type="button"
                    class="link"
                    aria-expanded={opened === delivery.id}
                    onClick={() => setOpened(opened === delivery.id ? undefined : delivery.id)}
                  >
                    Attempts
                  </button>
                  {opened === delivery.id && (
                    <Attempts api={api} base={base} deliveryId={delivery.id} canWrite={props.canWrite} onRetried={reload} />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.canWrite && <ReplayForm api={api} base={base} onDone={reload} />}
    </Modal>
  );
}

function Attempts(props: { api: PortalApi; base: string; deliveryId: string; canWrite: boolean; onRetried: () => Promise<void> }) {
  const path = `${props.base}/deliveries/${props.deliveryId}`;
  const [detail, setDetail] = useState<{ delivery: Delivery; attempts: DeliveryAttempt[] } | undefined>();
  const loading = useAction();
  const retrying = useAction();
  const load = () => loading.run(async () => setDetail(await props.api.json('GET', path)));
  useEffect(() => void load(), [props.deliveryId]);

  const retry = () =>
    retrying.run(async () => {
      await props.api.json('POST', `${path}/retry`);
      await load();
      await props.onRetried();
    });
  return (
    <div class="attempts">
      <ErrorNotice error={loading.error} />
      {detail && (
        <table>
          <caption>Attempts of {props.deliveryId}</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Started</th>
              <th scope="col">Duration</th>
              <th scope="col">Status code</th>
              <th scope="col">Error</th>
              <th scope="col">Response</th>
            </tr>
          </thead>
          <tbody>
            {detail.attempts.map((attempt) => (
              <tr key={attempt.attempt}>
                <td>{attempt.attempt}</td>
                <td>
                  <Time value={attempt.started_at} />
                </td>
                <td>{attempt.duration_ms} ms</td>
                <td>{attempt.status_code ?? '—'}</td>
                <td>{attempt.error ?? '—'}</td>
                <td>
                  <pre class="excerpt">{attempt.response_excerpt}</pre>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.canWrite && detail && detail.delivery.status !== 'succeeded' && (
        <button type="button" class="secondary" disabled={retrying.busy} onClick={retry}>
          Retry now
        </button>
      )}
      <ErrorNotice error={retrying.error} />
    </div>
  );
}

function ReplayForm(props: { api: PortalApi; base: string; onDone: () => Promise<void> }) {
  const [replay, setReplay] = useState<Replay | undefined>();
  const running = useAction();

  const submit = (event: Event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    void running.run(async () => {
      let current = (
        await props.api.json<{ replay: Replay }>('POST', `${props.base}/replay`, {
          body: {
            since: localInputToIso(String(data.get('since') ?? '')),
            until: localInputToIso(String(data.get('until') ?? '')),
            only_undelivered: data.get('only_undelivered') === 'on',
          },
        })
      ).replay;
      setReplay(current);
      while (current.status === 'running') {
        await new Promise((resolve) => setTimeout(resolve, REPLAY_POLL_MS));
        current = (await props.api.json<{ replay: Replay }>('GET', `${props.base}/replays/${current.id}`)).replay;
        setReplay(current);
      }
      await props.onDone();
    });
  };

  return (
    <form class="replay" onSubmit={submit} aria-labelledby="replay-title">
      <h3 id="replay-title">Replay a time range</h3>
      <label>
        From
        <input name="since" type="datetime-local" step="1" required />
      </label>
      <label>
        Until
        <input name="until" type="datetime-local" step="1" required />
      </label>
      <label class="inline">
        <input name="only_undelivered" type="checkbox" defaultChecked />
        Only events not yet delivered
      </label>
      <button type="submit" disabled={running.busy}>
        Replay
      </button>
      <ErrorNotice error={running.error} />
      {replay && (
        <p role="status" data-testid="replay-status">
          Replay {replay.status}: {replay.events_matched} events matched, {replay.deliveries_created} deliveries created.
        </p>
      )}
    </form>
  );
}
