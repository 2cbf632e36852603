import { AuditTrailApiError, sleep } from '../apiTransport.ts';
import type { AuditEvent } from '../auditEvent.ts';
import type { AuditTrailClient, EventFilters } from '../auditTrailClient.ts';

/**
 * Runs a command that follows the trail until the user stops it: Ctrl-C (SIGINT) or SIGTERM aborts the
 * signal, the live connection closes, and the command ends normally (exit 0) rather than being killed in
 * the middle of a line. A failure that is not the interruption is the command's failure.
 */
export async function untilInterrupted(follow: (signal: AbortSignal) => Promise<void>): Promise<void> {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await follow(controller.signal);
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}

/**
 * The live stream (GET /audit/events/live) after `lastEventId`, each event handed to `onEvent` in turn (the
 * next is read when it is done). The stream can only resume after a sealed event, and the event named may
 * not be sealed yet (the service seals within its SEAL_INTERVAL): the answer is then 409 not_yet_sealed, and
 * the stream is asked again a second later, from the last event handled.
 */
export async function followAfter(
  client: AuditTrailClient,
  options: EventFilters & { lastEventId: string | undefined; signal: AbortSignal },
  onEvent: (event: AuditEvent) => unknown,
): Promise<void> {
  const { signal, ...filters } = options;
  let lastEventId = options.lastEventId;
  for (;;) {
    try {
      for await (const event of client.live({ ...filters, lastEventId, signal })) {
        await onEvent(event);
        lastEventId = event.event_id;
      }
      return;
    } catch (error) {
      if (!(error instanceof AuditTrailApiError && error.code === 'not_yet_sealed') || signal.aborted) throw error;
      await sleep(1000, signal);
    }
  }
}
