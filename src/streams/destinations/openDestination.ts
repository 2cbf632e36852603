import type { DestinationInput } from '../streamRules.ts';
import { DatadogLogs } from './datadogLogs.ts';
import type { Destination } from './destination.ts';
import { HttpPoster } from './httpPoster.ts';
import { HttpsCollector } from './httpsCollector.ts';
import { S3Objects } from './s3Objects.ts';
import { SplunkHec } from './splunkHec.ts';

export interface DestinationOptions {
  /** A request without a complete answer within this is retried. */
  readonly timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: the SSRF guard is off. */
  readonly allowPrivateTargets: boolean;
}

/**
 * The destination of a stream, with its secrets: the destination as created (secrets included, opened from
 * the stream's secret box) and, for `https`, the signing secret the service generated.
 */
export function openDestination(
  destination: DestinationInput,
  signingSecret: string | undefined,
  options: DestinationOptions,
): Destination {
  const poster = () => new HttpPoster(options);
  switch (destination.type) {
    case 'splunk_hec':
      return new SplunkHec(destination, poster());
    case 'datadog':
      return new DatadogLogs(destination, poster());
    case 'https':
      if (signingSecret === undefined) throw new Error('an https stream needs its signing secret');
      return new HttpsCollector(destination.url, signingSecret, poster());
    case 's3':
      return new S3Objects(destination, options);
  }
}
