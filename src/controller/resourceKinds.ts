import { LEGAL_HOLD, RETENTION_POLICY } from './lifecycleKinds.ts';
import { API_KEY } from './resources.ts';
import { WEBHOOK_ENDPOINT } from './webhookEndpointResource.ts';
import { AUDIT_LOG_STREAM } from './streamResource.ts';

/** Every kind the controller reconciles, and scripts/generate-crds.ts writes a CRD for. */
export const RESOURCE_KINDS = [API_KEY, WEBHOOK_ENDPOINT, RETENTION_POLICY, LEGAL_HOLD, AUDIT_LOG_STREAM] as const;
