import type { Actor } from '../events/adminEvent.ts';
import { uuidv7 } from '../events/uuidv7.ts';
import { SigningKeys, signedRequest } from './deliveryRequest.ts';
import { buildEnvelope } from '../client/webhookEnvelope.ts';
import type { SecretBox } from '../webhooks/secretBox.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import type { WebhookSender } from './webhookSender.ts';
import { systemClock } from '../platform/clock.ts';

/** What POST /audit/webhooks/{id}/test answers (docs/webhooks.md "Test sends"). */
export interface TestSendResult {
  readonly success: boolean;
  readonly statusCode: number | null;
  readonly durationMs: number;
  readonly error: string | null;
}

export interface TestDeliveriesOptions {
  readonly registry: WebhookRegistry;
  readonly secrets: SecretBox;
  /** The api role's own sender: the same SSRF guard, timeout and redirect rule as the workers'. */
  readonly sender: WebhookSender;
}

const TEST_EVENT_ACTION = 'webhook.test';

/**
 * Test sends: one `webhook.test` delivery, signed like every delivery (every valid key of the endpoint's
 * signature schemes), with its custom headers and time limit, and sent synchronously. Nothing is stored: the envelope is no event of the trail, and the
 * outcome is only the answer, so a failing test never counts towards auto-disable.
 */
export class TestDeliveries {
  private readonly options: TestDeliveriesOptions;
  private readonly signingKeys: SigningKeys;

  constructor(options: TestDeliveriesOptions) {
    this.options = options;
    this.signingKeys = new SigningKeys(options.secrets);
  }

  async send(tenantId: string, endpointId: string, actor: Actor): Promise<TestSendResult> {
    const { endpoint, secrets } = await this.options.registry.deliveryTarget(tenantId, endpointId);
    const now = systemClock.now();
    const eventId = uuidv7(now);
    const body = buildEnvelope({
      eventId,
      timestamp: new Date(now).toISOString(),
      action: TEST_EVENT_ACTION,
      tenantId,
      userId: actor.userId,
      userRole: actor.userRole,
      resourceType: 'webhook_endpoint',
      resourceId: endpoint.id,
      phiInvolved: false,
      success: true,
      details: JSON.stringify({ message: 'A test delivery: no audit event stands behind it.' }),
    });
    const request = signedRequest(body, eventId, 1, this.signingKeys.at(endpoint.id, secrets, now), now);
    const timeoutMs = endpoint.timeoutS === null ? undefined : endpoint.timeoutS * 1000;
    const result = await this.options.sender.send(endpoint.id, endpoint.url, request.body, request.headers, timeoutMs);
    return { success: result.ok, statusCode: result.statusCode, durationMs: result.durationMs, error: result.error };
  }
}
