import { Counter, Gauge, type Registry } from 'prom-client';
import type { LongReadDutyCycleObserver } from './longReadDutyCycle.ts';
import type { LongReadYieldObserver } from './longReadYield.ts';

/**
 * The metrics of long reads yielding to short requests (platform/longReadYield.ts, docs/operations.md
 * "What a pod holds"): pauses and their time, pauses declined once an export has spent its share, and the
 * short requests they pause for, read at each scrape.
 */
export function longReadYieldMetrics(registry: Registry, shortRequests: { shortRequestsInFlight(): number }): LongReadYieldObserver {
  const yielding = new Gauge({
    name: 'audit_long_reads_yielding',
    help: 'Long reads (exports) paused right now for the short requests in flight to end',
    registers: [registry],
  });
  const yields = new Counter({
    name: 'audit_long_read_yields_total',
    help: 'Times a long read (an export) paused for the short requests in flight to end',
    registers: [registry],
  });
  const yieldSeconds = new Counter({
    name: 'audit_long_read_yield_seconds_total',
    help: 'Time long reads spent paused for short requests',
    registers: [registry],
  });
  const declined = new Counter({
    name: 'audit_long_read_yields_declined_total',
    help: 'Times a long read went on beside short requests because it had spent its share of time paused (LONG_READ_YIELD_SHARE)',
    registers: [registry],
  });
  new Gauge({
    name: 'audit_short_requests_in_flight',
    help: 'Authenticated requests in progress that are not long reads: what exports pause for',
    registers: [registry],
    collect() {
      this.set(shortRequests.shortRequestsInFlight());
    },
  });
  return {
    yielding: (delta) => yielding.inc(delta),
    yielded: (seconds) => {
      yields.inc();
      yieldSeconds.inc(seconds);
    },
    declined: () => declined.inc(),
  };
}

/** The metrics of long reads' duty cycle (platform/longReadDutyCycle.ts): its pauses and their time. */
export function longReadDutyCycleMetrics(registry: Registry): LongReadDutyCycleObserver {
  const pauses = new Counter({
    name: 'audit_long_read_duty_pauses_total',
    help: 'Times a long read (an export) paused after a round trip of rows because short requests were about (LONG_READ_DUTY_CYCLE)',
    registers: [registry],
  });
  const pauseSeconds = new Counter({
    name: 'audit_long_read_duty_pause_seconds_total',
    help: 'Time long reads spent in duty-cycle pauses while short requests were about',
    registers: [registry],
  });
  return {
    paused: (seconds) => {
      pauses.inc();
      pauseSeconds.inc(seconds);
    },
  };
}
