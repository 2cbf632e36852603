import type { Clock } from '../platform/clock.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import type { SealedSecrets, SecretBox } from '../webhooks/secretBox.ts';
import type { DeliveryWork } from './deliveryWork.ts';
import { SigningKeys, signedRequest } from './deliveryRequest.ts';
import { deliveryBody } from './deliveryBody.ts';
import { attemptVerdict, scheduleOf, type AttemptVerdict, type DeliveryOutcome, type DeliveryPolicy } from './deliveryStateMachine.ts';
import type { RetryPolicy } from './retryPolicy.ts';
import type { RotatedSecrets } from './rotatedSecrets.ts';
import type { SendResult, WebhookSender } from './webhookSender.ts';
import { deliveryMetrics } from './deliveryMetrics.ts';

export interface DeliveryAttemptsOptions {
  readonly secrets: SecretBox;
  readonly rotatedSecrets: RotatedSecrets;
  readonly sender: WebhookSender;
  readonly retryPolicy: RetryPolicy;
  readonly policy: DeliveryPolicy;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: ServiceMetrics;
}

/** What came of making one attempt, for the worker to record or give back. */
export type AttemptResult =
  /** A rotated secret could not be read (logged here): no attempt was made, the delivery comes back later. */
  | { readonly kind: 'secrets unreadable' }
  /** The endpoint was deleted meanwhile: nothing to send, nothing to record. */
  | { readonly kind: 'gone' }
  /** The request was made; `answered` when the receiver answered (any status). */
  | { readonly kind: 'attempted'; readonly outcome: DeliveryOutcome; readonly answered: boolean };

/**
 * One attempt of a delivery: signs the request with the endpoint's secrets valid now, sends it, counts and
 * logs what came of it. Throws when the worker cannot make it at all (a secret that does not open).
 */
export class DeliveryAttempts {
  private readonly options: DeliveryAttemptsOptions;
  private readonly signingKeys: SigningKeys;

  constructor(options: DeliveryAttemptsOptions) {
    this.options = options;
    this.signingKeys = new SigningKeys(options.secrets);
  }

  async make(
    held: { readonly deliveryId: string; readonly attempt: number },
    work: DeliveryWork,
    secretsGeneration: number,
  ): Promise<AttemptResult> {
    // Signed with the secrets valid now: a previous secret whose overlap ended, or that a second rotation
    // retired, while the delivery waited in its lane does not sign.
    const loaded = { secrets: work.endpoint.secrets, generation: secretsGeneration };
    let sealed: SealedSecrets | undefined;
    try {
      sealed = await this.options.rotatedSecrets.signing(work.endpoint.id, loaded);
    } catch (thrown) {
      this.options.log.warn(
        { err: coerceError(thrown), endpoint_id: work.endpoint.id },
        'could not read a rotated endpoint secret; the delivery will be tried again',
      );
      return { kind: 'secrets unreadable' };
    }
    if (!sealed) return { kind: 'gone' };
    const now = this.options.clock.now();
    const { endpoint } = work;
    const request = signedRequest(
      deliveryBody(work.content),
      work.eventId,
      held.attempt,
      this.signingKeys.at(endpoint.id, sealed, now),
      now,
    );
    const attemptedAt = new Date(this.options.clock.now());
    const timeoutMs = endpoint.timeoutS === null ? undefined : endpoint.timeoutS * 1000;
    const result = await this.options.sender.send(endpoint.id, endpoint.url, request.body, request.headers, timeoutMs);
    const outcome = {
      kind: 'attempted',
      deliveryId: held.deliveryId,
      attempt: held.attempt,
      ok: result.ok,
      jitter: this.options.retryPolicy.draw(),
      record: {
        attemptedAt,
        durationMs: result.durationMs,
        statusCode: result.statusCode,
        error: result.error,
        responseExcerpt: result.responseExcerpt,
      },
    } as const;
    // What the recorder's state machine will make of it, for the metrics and the log now.
    const verdict = attemptVerdict(outcome, this.options.policy, scheduleOf(endpoint));
    deliveryMetrics(this.options.metrics).attempts.inc({
      result: verdict.result === 'succeeded' ? 'success' : verdict.result === 'failed' ? 'failed' : 'retry',
    });
    deliveryMetrics(this.options.metrics).attemptDuration.observe(result.durationMs / 1000);
    this.logAttempt(held, work, result, verdict);
    return { kind: 'attempted', outcome, answered: result.statusCode !== null };
  }

  /**
   * Ids, attempt and what came back, so an operator can follow one delivery; never the URL (its query may
   * carry a token), the body, the signature or the receiver's answer. A success is logged at debug level,
   * so its line is not even assembled at the usual levels: that is thousands of objects a second.
   */
  private logAttempt(
    held: { readonly deliveryId: string; readonly attempt: number },
    work: DeliveryWork,
    result: SendResult,
    verdict: AttemptVerdict,
  ): void {
    const { log } = this.options;
    if (result.ok && !log.isLevelEnabled('debug')) return;
    const logged = {
      tenant_id: work.tenantId,
      endpoint_id: work.endpoint.id,
      event_id: work.eventId,
      delivery_id: held.deliveryId,
      attempt: held.attempt,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: result.durationMs,
      next_attempt_in_ms: verdict.retryInMs ?? null,
    };
    if (result.ok) log.debug(logged, 'webhook delivered');
    else if (verdict.result === 'failed') log.warn(logged, 'webhook delivery failed on its last attempt');
    else log.warn(logged, 'webhook delivery attempt failed; it will be retried');
  }
}
