/**
 * Where a log stream can deliver, as the stream form offers it: one entry per destination type of the API
 * (docs/streams.md), with the fields it takes. The types come from the client package's StreamDestination,
 * so a type the API gains is a compile error here until it has its entry, and its entry can name only
 * that type's fields: adding a destination is adding an entry.
 */
import type { StreamDestination } from '../../../src/client/logStreams.ts';

type DestinationType = StreamDestination['type'];
type FieldName<T extends DestinationType> = Exclude<keyof Extract<StreamDestination, { type: T }>, 'type'> & string;

export interface DestinationField<Name extends string = string> {
  readonly name: Name;
  readonly label: string;
  /** secret: write-only, never shown again; list: comma-separated; boolean: a checkbox. */
  readonly kind: 'text' | 'url' | 'secret' | 'list' | 'boolean';
  readonly required?: boolean;
  readonly placeholder?: string;
}

interface DestinationForm<T extends DestinationType> {
  readonly label: string;
  readonly fields: ReadonlyArray<DestinationField<FieldName<T>>>;
}

export const DESTINATIONS: { readonly [T in DestinationType]: DestinationForm<T> } = {
  splunk_hec: {
    label: 'Splunk (HTTP Event Collector)',
    fields: [
      { name: 'url', label: 'HEC URL', kind: 'url', required: true, placeholder: 'https://splunk.example.com:8088' },
      { name: 'token', label: 'HEC token', kind: 'secret', required: true },
      { name: 'index', label: 'Index', kind: 'text', placeholder: 'audit' },
      { name: 'source', label: 'Source', kind: 'text', placeholder: 'audit-trail' },
      { name: 'sourcetype', label: 'Sourcetype', kind: 'text' },
    ],
  },
  datadog: {
    label: 'Datadog (logs intake)',
    fields: [
      { name: 'url', label: 'Logs intake URL', kind: 'url', required: true, placeholder: 'https://http-intake.logs.datadoghq.eu' },
      { name: 'api_key', label: 'API key', kind: 'secret', required: true },
      { name: 'service', label: 'Service', kind: 'text', placeholder: 'audit-trail' },
      { name: 'tags', label: 'Tags (comma-separated)', kind: 'list', placeholder: 'env:prod' },
    ],
  },
  https: {
    label: 'HTTPS collector (signed, gzipped NDJSON)',
    fields: [{ name: 'url', label: 'Collector URL', kind: 'url', required: true, placeholder: 'https://collector.example.com/audit' }],
  },
  amqp: {
    label: 'AMQP 0-9-1 broker (RabbitMQ)',
    fields: [
      { name: 'url', label: 'Broker URL', kind: 'url', required: true, placeholder: 'amqps://rabbit.example.com/siem' },
      { name: 'username', label: 'Username', kind: 'text', required: true },
      { name: 'password', label: 'Password', kind: 'secret', required: true },
      { name: 'exchange', label: 'Exchange', kind: 'text', required: true },
      { name: 'routing_key', label: 'Routing key', kind: 'text' },
    ],
  },
  s3: {
    label: 'S3 or S3-compatible storage',
    fields: [
      { name: 'bucket', label: 'Bucket', kind: 'text', required: true },
      { name: 'prefix', label: 'Prefix', kind: 'text', required: true, placeholder: 'audit/prod' },
      { name: 'region', label: 'Region', kind: 'text', required: true, placeholder: 'eu-west-1' },
      { name: 'endpoint', label: 'Endpoint (MinIO, R2…; empty for AWS)', kind: 'url' },
      { name: 'access_key_id', label: 'Access key id', kind: 'text', required: true },
      { name: 'secret_access_key', label: 'Secret access key', kind: 'secret', required: true },
      { name: 'force_path_style', label: 'Path-style addressing', kind: 'boolean' },
    ],
  },
};

export const DESTINATION_TYPES = Object.keys(DESTINATIONS) as DestinationType[];

/** The destination of the form's fields, as the API takes it: empty optional fields left out. */
export function destinationFrom(type: DestinationType, data: FormData): Record<string, unknown> {
  const destination: Record<string, unknown> = { type };
  for (const field of DESTINATIONS[type].fields as ReadonlyArray<DestinationField>) {
    const raw = data.get(`destination.${field.name}`);
    if (field.kind === 'boolean') {
      if (raw === 'on') destination[field.name] = true;
      continue;
    }
    const text = String(raw ?? '').trim();
    if (text === '') continue;
    destination[field.name] =
      field.kind === 'list'
        ? text
            .split(',')
            .map((entry) => entry.trim())
            .filter(Boolean)
        : text;
  }
  return destination;
}

/** Where a stream delivers, in a few words: its URL, or its bucket and prefix. */
export function destinationSummary(destination: { type: DestinationType; [member: string]: unknown }): string {
  if (typeof destination.url === 'string') return destination.url;
  if (typeof destination.bucket === 'string') return `s3://${destination.bucket}/${String(destination.prefix ?? '')}`;
  return DESTINATIONS[destination.type]?.label ?? destination.type;
}
