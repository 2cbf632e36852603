import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import type { AuditTrailClient } from '../auditTrailClient.ts';
import type { DeliveryFilters, WebhookReplay } from '../webhookShapes.ts';
import {
  OUTPUT_OPTION,
  PAGING_OPTIONS,
  URL_OPTION,
  WINDOW_OPTIONS,
  operands,
  outputFormat,
  pagingOf,
  secondsFlag,
} from './commandOptions.ts';
import { clientFrom } from './connection.ts';
import { onePage, writePages } from './pagedOutput.ts';
import { DELIVERY_COLUMNS, ENDPOINT_COLUMNS, TableLayout, printable } from './tableOutput.ts';
import { UsageError } from './usage.ts';
import {
  SETTINGS_OPTIONS,
  disableEndpoint,
  enableEndpoint,
  publicKeys,
  updateEndpoint,
  type SettingsValues,
} from './webhookSettingsCommand.ts';

/**
 * `audit-trail-client webhooks ...`: the endpoint operations of docs/webhooks.md from a terminal. Each
 * prints one line for a person (`--output table`, the default) or the API's answer (`--output json`).
 */

type Operation = (client: AuditTrailClient, operands: string[], values: Values, json: boolean) => Promise<number>;

interface Values extends SettingsValues {
  status?: string;
  since?: string;
  until?: string;
  limit?: string;
  cursor?: string;
  all?: boolean;
  output?: string;
  'include-delivered'?: boolean;
  wait?: boolean;
  overlap?: string;
  force?: boolean;
}

const OPTIONS = {
  ...URL_OPTION,
  ...OUTPUT_OPTION,
  ...WINDOW_OPTIONS,
  ...PAGING_OPTIONS,
  status: { type: 'string' },
  'include-delivered': { type: 'boolean', default: false },
  wait: { type: 'boolean', default: false },
  overlap: { type: 'string' },
  ...SETTINGS_OPTIONS,
  force: { type: 'boolean', default: false },
} as const;

/** Each subcommand: its operands and the options it takes beyond --url and --output. */
const OPERATIONS: Record<string, { operands: string[]; options: Array<keyof Values>; run: Operation }> = {
  list: { operands: [], options: [], run: listEndpoints },
  deliveries: { operands: ['WEBHOOK_ID'], options: ['status', 'since', 'until', 'limit', 'cursor', 'all'], run: listDeliveries },
  retry: { operands: ['WEBHOOK_ID', 'DELIVERY_ID'], options: [], run: retryDelivery },
  replay: { operands: ['WEBHOOK_ID'], options: ['since', 'until', 'include-delivered', 'wait'], run: replay },
  test: { operands: ['WEBHOOK_ID'], options: [], run: testEndpoint },
  rotate: { operands: ['WEBHOOK_ID'], options: ['overlap', 'force'], run: rotateSecret },
  update: {
    operands: ['WEBHOOK_ID'],
    options: Object.keys(SETTINGS_OPTIONS) as Array<keyof Values>,
    run: (client, [id], values, json) => updateEndpoint(client, id!, values, json),
  },
  enable: { operands: ['WEBHOOK_ID'], options: [], run: (client, [id], _values, json) => enableEndpoint(client, id!, json) },
  disable: { operands: ['WEBHOOK_ID'], options: [], run: (client, [id], _values, json) => disableEndpoint(client, id!, json) },
  'public-keys': { operands: ['WEBHOOK_ID'], options: [], run: (client, [id], _values, json) => publicKeys(client, id!, json) },
};

export async function runWebhooks(args: string[]): Promise<number> {
  const [subcommand, ...rest] = args;
  const operation = subcommand !== undefined && Object.hasOwn(OPERATIONS, subcommand) ? OPERATIONS[subcommand] : undefined;
  if (!operation) {
    throw new UsageError(subcommand === undefined ? 'webhooks takes a command' : `unknown webhooks command "${subcommand}"`);
  }
  const { values, positionals, tokens } = parseArgs({ args: rest, options: OPTIONS, allowPositionals: true, tokens: true });
  // One parser for all subcommands, so an option another subcommand takes is refused here by name.
  const foreign = tokens.find((token) => token.kind === 'option' && !['url', 'output', ...operation.options].includes(token.name));
  if (foreign?.kind === 'option') throw new UsageError(`webhooks ${subcommand} does not take ${foreign.rawName}`);
  const format = outputFormat(
    values.output,
    subcommand === 'deliveries' ? (['table', 'json', 'ndjson'] as const) : (['table', 'json'] as const),
  );
  const names = operands(positionals, operation.operands);
  return operation.run(clientFrom(values.url), names, { ...values, output: format }, format === 'json');
}

async function listEndpoints(client: AuditTrailClient, _operands: string[], _values: Values, json: boolean): Promise<number> {
  const endpoints = await client.listWebhooks();
  if (json) process.stdout.write(`${JSON.stringify({ endpoints })}\n`);
  else process.stdout.write(new TableLayout(ENDPOINT_COLUMNS).table(endpoints));
  return 0;
}

async function listDeliveries(client: AuditTrailClient, [endpointId]: string[], values: Values): Promise<number> {
  const { limit, cursor, all } = pagingOf(values);
  const filters: DeliveryFilters = { status: values.status as DeliveryFilters['status'], since: values.since, until: values.until, limit };
  const pages = all
    ? client.listDeliveries(endpointId!, filters)
    : onePage(() => client.listDeliveryPage(endpointId!, { ...filters, cursor }));
  const format = values.output as 'table' | 'json' | 'ndjson';
  await writePages(pages, { member: 'deliveries', items: (page) => page.deliveries, columns: DELIVERY_COLUMNS, format, all });
  return 0;
}

async function retryDelivery(
  client: AuditTrailClient,
  [endpointId, deliveryId]: string[],
  _values: Values,
  json: boolean,
): Promise<number> {
  const delivery = await client.retryDelivery(endpointId!, deliveryId!);
  if (json) process.stdout.write(`${JSON.stringify({ delivery })}\n`);
  else process.stdout.write(`retry of ${printable(delivery.id)} accepted: one more attempt within a second\n`);
  return 0;
}

/** Starts a replay; with --wait, follows it until it is no longer running. */
async function replay(client: AuditTrailClient, [endpointId]: string[], values: Values, json: boolean): Promise<number> {
  if (values.since === undefined || values.until === undefined) throw new UsageError('webhooks replay needs --since and --until');
  const range = { since: values.since, until: values.until, only_undelivered: !values['include-delivered'] };
  let current = await client.replay(endpointId!, range);
  if (!json) process.stdout.write(replayLine(current));
  while (values.wait && current.status === 'running') {
    // The replay runs in the service's background; a second between looks is as often as a person reads.
    await delay(1000);
    current = await client.getReplay(endpointId!, current.id);
    if (!json && current.status !== 'running') process.stdout.write(replayLine(current));
  }
  if (json) process.stdout.write(`${JSON.stringify({ replay: current })}\n`);
  return 0;
}

function replayLine(replay: WebhookReplay): string {
  return `replay ${printable(replay.id)} ${printable(replay.status)}: ${replay.events_matched} events matched, ${replay.deliveries_created} deliveries created\n`;
}

/** Exits 1 when the receiver did not accept the test delivery, so scripts can check an endpoint. */
async function testEndpoint(client: AuditTrailClient, [endpointId]: string[], _values: Values, json: boolean): Promise<number> {
  const result = await client.testWebhook(endpointId!);
  if (json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else {
    const answer = result.status_code === null ? printable(result.error ?? 'no answer') : `HTTP ${result.status_code}`;
    process.stdout.write(`test delivery ${result.success ? 'accepted' : 'failed'}: ${answer} in ${result.duration_ms} ms\n`);
  }
  return result.success ? 0 : 1;
}

/**
 * The new secret is shown this once, as the API shows it: the receiver needs it. A rotation while the last
 * one's overlap is in progress ends that overlap at once (an endpoint signs with two secrets at most): a
 * receiver still on the oldest secret starts failing. So that is done only with --force, after saying so.
 */
async function rotateSecret(client: AuditTrailClient, [endpointId]: string[], values: Values, json: boolean): Promise<number> {
  const overlapEnds = (await client.listWebhooks()).find((endpoint) => endpoint.id === endpointId)?.previous_secret_expires_at;
  if (overlapEnds && !values.force) {
    process.stderr.write(
      `audit-trail-client: not rotated: the secret replaced by the last rotation still signs until ${printable(overlapEnds)}. ` +
        'Rotating now ends that overlap at once: receivers still verifying with it start failing. ' +
        'Once they verify with the current secret, run this again with --force.\n',
    );
    return 1;
  }
  const rotated = await client.rotateSecret(endpointId!, { overlapS: secondsFlag('--overlap', values.overlap) });
  if (json) process.stdout.write(`${JSON.stringify(rotated)}\n`);
  else {
    process.stdout.write(
      `new secret:               ${rotated.secret}\n` +
        `standard webhooks secret: ${rotated.standard_webhooks_secret}\n` +
        `the previous secret signs beside it until ${rotated.previous_secret_expires_at}\n`,
    );
  }
  return 0;
}
