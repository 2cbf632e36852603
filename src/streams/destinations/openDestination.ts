import type { DestinationInput, StreamFormat } from '../streamRules.ts';
import { AmqpBroker } from './amqpBroker.ts';
import { DatadogLogs } from './datadogLogs.ts';
import type { Destination } from './destination.ts';
import { HttpPoster } from './httpPoster.ts';
import { HttpsCollector } from './httpsCollector.ts';
import { S3Objects } from './s3Objects.ts';
import { systemClock } from '../../platform/clock.ts';
import { DEFAULT_HEC_ACK_TIMEOUT_MS, SplunkHec } from './splunkHec.ts';

export interface DestinationOptions {
  /** A request without a complete answer within this is retried. */
  readonly timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: the SSRF guard is off. */
  readonly allowPrivateTargets: boolean;
  /** STREAMS_HEC_ACK_TIMEOUT_MS: a batch HEC did not acknowledge within this is sent again (splunkHec.ts). */
  readonly hecAckTimeoutMs?: number;
}

/**
 * The destination of a stream, with its secrets: the destination as created (secrets included, opened from
 * the stream's secret box) and, for `https`, the signing secret the service generated; `format` is the
 * stream's (an AMQP broker names it in its routing key and message type).
 */
export function openDestination(
  destination: DestinationInput,
  signingSecret: string | undefined,
  options: DestinationOptions,
  format: StreamFormat,
): Destination {
  const poster = () => new HttpPoster(options);
  switch (destination.type) {
    case 'splunk_hec':
      return new SplunkHec(destination, poster(), {
        ackTimeoutMs: options.hecAckTimeoutMs ?? DEFAULT_HEC_ACK_TIMEOUT_MS,
        clock: systemClock,
      });
    case 'datadog':
      return new DatadogLogs(destination, poster());
    case 'https':
      if (signingSecret === undefined) throw new Error('an https stream needs its signing secret');
      return new HttpsCollector(destination, signingSecret, poster());
    case 's3':
      return new S3Objects(destination, options);
    case 'amqp':
      return new AmqpBroker(destination, { ...options, format });
  }
}
