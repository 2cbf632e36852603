/**
 * The tenant's log streams (docs/streams.md): each one's destination, state and lag for every session;
 * creating, testing, pausing, resuming and deleting with streams:write, whose controls are absent otherwise.
 */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import type { LogStream, PortalSession, StreamTestResult } from '../types.ts';
import { CopyButton, ErrorNotice, Modal, OnceSecret, Time, useAction } from '../ui.tsx';
import { DESTINATIONS, destinationSummary } from './destinations.ts';
import { StreamForm } from './StreamForm.tsx';

const STATES: Record<LogStream['status'], string> = { active: 'Active', paused: 'Paused', failing: 'Failing' };

/** How far behind a stream is, in words. */
function lagOf(stream: LogStream): string {
  if (stream.status === 'paused' && stream.lag_events > 0) return `${stream.lag_events} events waiting (paused)`;
  if (stream.lag_events === 0) return 'Caught up';
  return `${stream.lag_events} ${stream.lag_events === 1 ? 'event' : 'events'} behind, the oldest ${stream.lag_seconds} s ago`;
}

export function StreamsPage(props: { api: PortalApi; session: PortalSession }) {
  const { api } = props;
  const canWrite = props.session.capabilities.includes('streams:write');
  const [streams, setStreams] = useState<LogStream[] | undefined>();
  const [secret, setSecret] = useState<string | undefined>();
  const loading = useAction();
  const reload = () => loading.run(async () => setStreams((await api.json<{ streams: LogStream[] }>('GET', '/audit/streams')).streams));
  useEffect(() => void reload(), []);

  return (
    <section aria-labelledby="streams-title">
      <h1 id="streams-title">Log streams</h1>
      <p class="notice">Your trail, delivered in order and in batches to your SIEM or storage, as it is written.</p>
      <div class="toolbar">
        <button type="button" class="secondary" onClick={() => reload()} disabled={loading.busy}>
          Refresh
        </button>
      </div>
      <ErrorNotice error={loading.error} />
      {streams && streams.length === 0 && <p class="empty">No log streams yet.</p>}
      {streams && streams.length > 0 && (
        <table class="streams cards">
          <caption class="visually-hidden">Log streams</caption>
          <thead>
            <tr>
              <th scope="col">Destination</th>
              <th scope="col">State</th>
              <th scope="col">Lag</th>
              <th scope="col">Last delivered</th>
              <th scope="col">Last error</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {streams.map((stream) => (
              <StreamRow key={stream.id} api={api} stream={stream} canWrite={canWrite} onChanged={reload} />
            ))}
          </tbody>
        </table>
      )}
      {canWrite && (
        <StreamForm
          api={api}
          onCreated={async (created) => {
            if (created.secret) setSecret(created.secret);
            await reload();
          }}
        />
      )}
      {secret && (
        <Modal title="Stream created" onClose={() => setSecret(undefined)}>
          <OnceSecret label="Signing secret of its batches." secret={secret} />
        </Modal>
      )}
    </section>
  );
}

function StreamRow(props: { api: PortalApi; stream: LogStream; canWrite: boolean; onChanged: () => Promise<void> }) {
  const { api, stream } = props;
  const path = `/audit/streams/${stream.id}`;
  const [test, setTest] = useState<StreamTestResult | undefined>();
  const [deleting, setDeleting] = useState(false);
  const action = useAction();
  const change = (verb: 'pause' | 'resume') =>
    action.run(async () => {
      await api.json('POST', `${path}/${verb}`);
      await props.onChanged();
    });
  return (
    <tr data-stream-id={stream.id}>
      <td data-label="Destination">
        <strong class="block">{DESTINATIONS[stream.destination.type]?.label ?? stream.destination.type}</strong>
        <span class="url block">{destinationSummary(stream.destination)}</span>
        <span class="muted">
          {stream.format === 'ocsf' ? 'OCSF' : 'Native'}
          {stream.filter.action_prefixes?.length ? `, ${stream.filter.action_prefixes.join(', ')}` : ', every action'}
          {stream.filter.phi_involved === undefined ? '' : stream.filter.phi_involved ? ', PHI only' : ', without PHI'}
        </span>
        <CopyButton value={stream.id} label={`Copy id of the stream to ${destinationSummary(stream.destination)}`}>
          Copy id
        </CopyButton>
      </td>
      <td data-label="State" class={stream.status === 'failing' ? 'bad' : stream.status === 'active' ? 'ok' : undefined}>
        {STATES[stream.status]}
      </td>
      <td data-label="Lag">{lagOf(stream)}</td>
      <td data-label="Last delivered">
        <Time value={stream.last_delivered_at} />
      </td>
      <td data-label="Last error">
        {stream.last_error ? (
          <>
            {stream.last_error} <span class="muted">at</span> <Time value={stream.last_error_at} />
          </>
        ) : (
          '—'
        )}
      </td>
      <td class="actions row-actions">
        {props.canWrite && (
          <div class="buttons">
            <button
              type="button"
              class="secondary"
              disabled={action.busy}
              onClick={() => action.run(async () => setTest(await api.json<StreamTestResult>('POST', `${path}/test`)))}
            >
              Send test
            </button>
            {stream.status === 'paused' ? (
              <button type="button" class="secondary" disabled={action.busy} onClick={() => change('resume')}>
                Resume
              </button>
            ) : (
              <button type="button" class="secondary" disabled={action.busy} onClick={() => change('pause')}>
                Pause
              </button>
            )}
            {stream.status === 'failing' && (
              <button type="button" class="secondary" disabled={action.busy} onClick={() => change('resume')}>
                Try now
              </button>
            )}
            <button type="button" class="danger" onClick={() => setDeleting(true)}>
              Delete
            </button>
          </div>
        )}
        {test && (
          <span role="status" class={test.success ? 'ok' : 'bad'}>
            {test.success
              ? `Test record accepted in ${test.duration_ms} ms`
              : `Test failed: ${test.error ?? 'refused'} after ${test.duration_ms} ms`}
          </span>
        )}
        <ErrorNotice error={action.error} />
        {deleting && (
          <Modal title="Delete this log stream?" onClose={() => setDeleting(false)}>
            <p>
              Deliveries to <span class="url">{destinationSummary(stream.destination)}</span> stop. What it delivered stays where it went.
            </p>
            <button
              type="button"
              class="danger"
              onClick={() =>
                action.run(async () => {
                  await api.json('DELETE', path);
                  setDeleting(false);
                  await props.onChanged();
                })
              }
            >
              Delete stream
            </button>
          </Modal>
        )}
      </td>
    </tr>
  );
}
