import { newEvent } from '../../test/support/newEvents.ts';
import { seedEvents } from '../../test/support/events.ts';

/**
 * One tenant of `count` events written through the write path, 10,000 at a time: one every 6 s back from
 * `nowMs`, actions taken in turn from `actions`, 500 users and 20,000 patient records. The dataset of the
 * portal and search benchmarks.
 */
export async function seedBigTenant(
  databaseUrl: string,
  tenantId: string,
  count: number,
  actions: readonly string[],
  nowMs: number,
): Promise<void> {
  for (let offset = 0; offset < count; offset += 10_000) {
    await seedEvents(
      databaseUrl,
      Array.from({ length: Math.min(10_000, count - offset) }, (_, index) => {
        const n = offset + index;
        return newEvent({
          tenantId,
          occurredAtMs: nowMs - n * 6_000,
          action: actions[n % actions.length]!,
          userId: `user-${n % 500}`,
          resourceType: 'patient_record',
          resourceId: `patient-${n % 20_000}`,
        });
      }),
    );
  }
}
