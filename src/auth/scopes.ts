/** The opt-in scopes (docs/api.md "Authentication and scopes"); a call lacking its endpoint's scope gets 403. */
export const SCOPES = ['audit:read', 'audit:export', 'webhooks:write', 'portal:sessions', 'streams:write'] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
