/** A new log stream (docs/streams.md): its destination, format, filter and starting point. */
import { useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import { localInputToIso, timeZone } from '../time.ts';
import type { CreatedLogStream } from '../types.ts';
import { ErrorNotice, useAction } from '../ui.tsx';
import { DESTINATIONS, DESTINATION_TYPES, destinationFrom, type DestinationField } from './destinations.ts';

const list = (text: string) =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);

export function StreamForm(props: { api: PortalApi; onCreated: (created: CreatedLogStream) => Promise<void> }) {
  const [type, setType] = useState(DESTINATION_TYPES[0]!);
  const creating = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const phi = String(data.get('phi_involved') ?? '');
    const prefixes = list(String(data.get('action_prefixes') ?? ''));
    const since = localInputToIso(String(data.get('start_at') ?? ''));
    void creating.run(async () => {
      const created = await props.api.json<CreatedLogStream>('POST', '/audit/streams', {
        body: {
          destination: destinationFrom(type, data),
          format: String(data.get('format') ?? 'native'),
          filter: {
            ...(prefixes.length > 0 ? { action_prefixes: prefixes } : {}),
            ...(phi === '' ? {} : { phi_involved: phi === 'true' }),
          },
          start_at: since ?? 'now',
          tree_heads: data.get('tree_heads') === 'on',
        },
      });
      form.reset();
      await props.onCreated(created);
    });
  };
  return (
    <form class="create" onSubmit={submit} aria-labelledby="new-stream-title">
      <h2 id="new-stream-title">New log stream</h2>
      <label>
        Destination
        <select name="type" value={type} onChange={(event) => setType((event.currentTarget as HTMLSelectElement).value as typeof type)}>
          {DESTINATION_TYPES.map((candidate) => (
            <option key={candidate} value={candidate}>
              {DESTINATIONS[candidate].label}
            </option>
          ))}
        </select>
      </label>
      {(DESTINATIONS[type].fields as ReadonlyArray<DestinationField>).map((field) => (
        <DestinationInput key={`${type}.${field.name}`} field={field} />
      ))}
      <label>
        Format
        <select name="format">
          <option value="native">Native (the event as the API serves it)</option>
          <option value="ocsf">OCSF</option>
        </select>
      </label>
      <label>
        Actions (families, comma-separated; empty for every event)
        <input name="action_prefixes" placeholder="phi., admin." autocomplete="off" />
      </label>
      <label>
        PHI
        <select name="phi_involved">
          <option value="">Any</option>
          <option value="true">PHI only</option>
          <option value="false">Without PHI</option>
        </select>
      </label>
      <label>
        Start from (empty: from now; a past time backfills), {timeZone()}
        <input name="start_at" type="datetime-local" step="1" />
      </label>
      <label class="inline">
        <input name="tree_heads" type="checkbox" defaultChecked />
        Each batch carries the latest signed tree head
      </label>
      <button type="submit" disabled={creating.busy}>
        Create stream
      </button>
      <ErrorNotice error={creating.error} />
    </form>
  );
}

function DestinationInput(props: { field: DestinationField }) {
  const { field } = props;
  const name = `destination.${field.name}`;
  if (field.kind === 'boolean') {
    return (
      <label class="inline">
        <input name={name} type="checkbox" />
        {field.label}
      </label>
    );
  }
  const common = { name, required: field.required, placeholder: field.placeholder, autocomplete: 'off', spellcheck: false };
  if (field.kind === 'secret') {
    return (
      <label>
        {field.label}
        <input type="password" {...common} />
      </label>
    );
  }
  if (field.kind === 'url') {
    return (
      <label>
        {field.label}
        <input type="url" {...common} />
      </label>
    );
  }
  return (
    <label>
      {field.label}
      <input type="text" {...common} />
    </label>
  );
}
