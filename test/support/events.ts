import type { NewEvent } from '../../src/events/eventStore.ts';
import { Database } from '../../src/db/database.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { testLogger } from './service.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';

/** Stores events through the real write path, in batches of 1,000. */
export async function seedEvents(databaseUrl: string, events: readonly NewEvent[]): Promise<void> {
  const db = new Database({ url: databaseUrl, poolSize: 2, applicationName: 'test seed', log: testLogger() });
  try {
    const writer = new EventWriter(db, WEBHOOK_FAN_OUT);
    for (let start = 0; start < events.length; start += 1000) {
      await writer.write(events.slice(start, start + 1000), 'test');
    }
  } finally {
    await db.close();
  }
}
