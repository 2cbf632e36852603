/** An endpoint's delivery log with each delivery's attempts, manual retry and replay of a time range (docs/webhooks.md). */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import type { Delivery, DeliveryAttempt, DeliveryStatus, Replay, WebhookEndpoint } from '../types.ts';
import { localInputToIso } from '../time.ts';
import { CopyButton, ErrorNotice, Modal, Time, useAction } from '../ui.tsx';
import { PayloadFilterNote } from './EndpointSettings.tsx';

const REPLAY_POLL_MS = 500;

/**
 * A delivery's state as it is: a delivery still being retried after a 401 is failing now, not "pending"
 * (the API's status says only that attempts remain).
 */
function deliveryState(delivery: Delivery): string {
  if (delivery.status === 'succeeded') return 'Delivered';
  if (delivery.status === 'failed') return 'Failed, not retried';
  return delivery.attempts === 0 ? 'Waiting for its first attempt' : `Retrying: attempt ${delivery.attempts} failed`;
}

/** What the receiver answered: its status, or why none came. */
function answerOf(statusCode: number | null, error: string | null): string {
  return statusCode !== null ? `HTTP ${statusCode}` : (error ?? '—');
}

/** An attempt succeeded when the receiver answered 2xx (docs/webhooks.md); anything else failed it. */
const succeeded = (statusCode: number | null) => statusCode !== null && statusCode >= 200 && statusCode < 300;

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
        <table class="deliveries cards">
          <caption class="visually-hidden">Deliveries, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Created</th>
              <th scope="col">Event</th>
              <th scope="col">State</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last answer</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.map((delivery) => (
              <tr key={delivery.id} data-delivery-id={delivery.id} data-status={delivery.status}>
                <td data-label="Created">
                  <Time value={delivery.created_at} />
                </td>
                <td data-label="Event">{delivery.action ?? delivery.event_id}</td>
                <td data-label="State" class={delivery.status === 'succeeded' ? 'ok' : delivery.attempts > 0 ? 'bad' : undefined}>
                  {deliveryState(delivery)}
                </td>
                <td data-label="Attempts">{delivery.attempts}</td>
                <td data-label="Last answer">{delivery.attempts === 0 ? '—' : answerOf(delivery.last_status_code, delivery.last_error)}</td>
                <td class="row-actions">
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
        <table class="cards">
          <caption>
            Attempts of {props.deliveryId} <CopyButton value={props.deliveryId} label={`Copy the delivery id ${props.deliveryId}`} />
          </caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Outcome</th>
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
                <td data-label="Attempt">{attempt.attempt}</td>
                <td data-label="Outcome" class={succeeded(attempt.status_code) ? 'ok' : 'bad'}>
                  {succeeded(attempt.status_code) ? 'Succeeded' : 'Failed'}
                </td>
                <td data-label="Started">
                  <Time value={attempt.started_at} />
                </td>
                <td data-label="Duration">{attempt.duration_ms} ms</td>
                <td data-label="Status code">{attempt.status_code ?? '—'}</td>
                <td data-label="Error">{attempt.error ?? '—'}</td>
                <td data-label="Response">
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
