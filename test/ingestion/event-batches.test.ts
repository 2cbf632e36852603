import { expect } from 'chai';
import { MAX_BATCH_SIZE, parseEvent, parseEventBatch } from '../../src/ingestion/eventInput.ts';
import { ValidationError } from '../../src/platform/errors.ts';
import { producerEvent } from '../support/newEvents.ts';

const DAY = 86_400_000;
const window = { maxAgeMs: 400 * DAY, maxFutureSkewMs: 5 * 60_000 };
const NOW = Date.UTC(2026, 11, 5, 6, 0, 0);
const at = (ms: number) => new Date(ms).toISOString();

function refusal(parse: () => unknown): ValidationError {
  try {
    parse();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('accepted');
}

/** What producers may write (docs/api.md "Ingesting events"): the event times, and batches stored whole or not at all. */
describe('producer events and batches', () => {
  it('dates an event without a timestamp now, and keeps the one a producer gives', () => {
    expect(parseEvent(producerEvent(), window, NOW).occurredAtMs).to.equal(NOW);
    expect(parseEvent(producerEvent({ timestamp: at(NOW - DAY) }), window, NOW).occurredAtMs).to.equal(NOW - DAY);
  });

  it('refuses a time further in the future than the clock skew allowance', () => {
    expect(parseEvent(producerEvent({ timestamp: at(NOW + 5 * 60_000) }), window, NOW).occurredAtMs).to.equal(NOW + 5 * 60_000);
    expect(
      refusal(() => parseEvent(producerEvent({ timestamp: at(NOW + 5 * 60_000 + 1) }), window, NOW, 'events.0')).details,
    ).to.deep.equal([{ field: 'events.0.timestamp', message: 'is more than 5 minutes in the future' }]);
  });

  it('refuses history older than the window, pointing to the operator’s import', () => {
    const [problem] = refusal(() => parseEvent(producerEvent({ timestamp: at(NOW - 401 * DAY) }), window, NOW)).details;
    expect(problem!.field).to.equal('timestamp');
    expect(problem!.message).to.include('is more than 400 days in the past').and.include('audit-trail import --allow-old');
    const backfill = { ...window, maxAgeMs: Number.POSITIVE_INFINITY };
    expect(parseEvent(producerEvent({ timestamp: at(NOW - 4000 * DAY) }), backfill, NOW).occurredAtMs).to.equal(NOW - 4000 * DAY);
  });

  it('refuses a whole batch for one invalid event, naming each problem by its place', () => {
    const batch = [producerEvent(), producerEvent({ action: 'Not An Action' }), producerEvent(), producerEvent({ user_id: '' })];
    const refused = refusal(() => parseEventBatch(batch, window));
    expect(refused.message).to.equal('2 of 4 events are invalid; none were stored');
    expect(refused.details.map((detail) => detail.field)).to.deep.equal(['events.1.action', 'events.3.user_id']);
  });

  it('takes at most 1,000 events a batch', () => {
    expect(parseEventBatch([producerEvent(), producerEvent()], window)).to.have.length(2);
    const tooMany = Array.from({ length: MAX_BATCH_SIZE + 1 }, () => producerEvent());
    expect(refusal(() => parseEventBatch(tooMany, window)).details).to.deep.equal([
      { field: 'events', message: 'must hold at most 1000 events' },
    ]);
  });
});
