/** The shapes of customer portal sessions in the public API (docs/portal.md). Types only. */

/** A customer portal session (docs/portal.md), as minted for the key's tenant. */
export interface PortalSession {
  /** `pss_…` */
  id: string;
  tenant_id: string;
  capabilities: Array<'audit:read' | 'audit:export' | 'webhooks:write' | 'streams:write'>;
  created_at: string;
  expires_at: string;
  [extra: string]: unknown;
}

export interface PortalSessionLink {
  session: PortalSession;
  /** Opens the portal once; hand it to one browser, never log it. */
  url: string;
}
