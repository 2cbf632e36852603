/**
 * How an endpoint is doing (GET /audit/webhooks/{id}/health, docs/webhooks.md "Endpoint health"): its recent
 * attempts as they were, a 401 a failure like any answer that is not 2xx, whether or not it will be retried.
 */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import { Time } from '../ui.tsx';

interface Health {
  readonly attempts: number;
  readonly succeeded: number;
  readonly success_rate: number | null;
  readonly failing_streak: number;
  readonly retrying: number;
  readonly last_success_at: string | null;
  readonly last_failure: { readonly at: string; readonly status_code: number | null; readonly error: string | null } | null;
}

/** Its state in a word, for the eye: failing when the latest attempts failed, whatever came before. */
function verdict(health: Health): { label: string; tone: 'ok' | 'bad' | 'muted' } {
  if (health.attempts === 0) return { label: 'No attempts in the last 24 hours', tone: 'muted' };
  if (health.failing_streak > 0)
    return {
      label: `Failing: ${health.failing_streak} failed ${health.failing_streak === 1 ? 'attempt' : 'attempts'} in a row`,
      tone: 'bad',
    };
  return { label: 'Healthy', tone: 'ok' };
}

export function EndpointHealth(props: { api: PortalApi; endpointId: string; refreshed: number }) {
  const [health, setHealth] = useState<Health | undefined>();
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    props.api.json<{ health: Health }>('GET', `/audit/webhooks/${props.endpointId}/health`).then(
      (body) => setHealth(body.health),
      () => setFailed(true),
    );
  }, [props.endpointId, props.refreshed]);
  if (failed) return <span class="muted">Health unavailable</span>;
  if (!health) return <span class="muted">…</span>;
  const { label, tone } = verdict(health);
  const rate = health.success_rate === null ? undefined : Math.round(health.success_rate * 100);
  return (
    <div class="health" data-testid="health">
      <strong class={tone}>{label}</strong>
      {rate !== undefined && (
        <span class="muted">
          {rate}% of {health.attempts} {health.attempts === 1 ? 'attempt' : 'attempts'} succeeded (24 h)
          {health.retrying > 0 ? `; ${health.retrying} ${health.retrying === 1 ? 'delivery' : 'deliveries'} retrying` : ''}
        </span>
      )}
      {health.last_failure && (
        <span class="muted">
          Last error:{' '}
          {health.last_failure.status_code !== null
            ? `HTTP ${health.last_failure.status_code}`
            : (health.last_failure.error ?? 'no answer')}{' '}
          at <Time value={health.last_failure.at} />
        </span>
      )}
    </div>
  );
}
