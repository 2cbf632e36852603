import { expect } from 'chai';
import { MAX_SAMPLES, STUCK_AFTER_MS, consumedBefore, withSample, type Sample } from '../../src/delivery/lostPublicationSamples.ts';

const STREAM = { created: '2030-01-01T00:00:00Z', lastSeq: 100 };
const T0 = Date.UTC(2030, 0, 1, 12);

function sample(lastSeq: number, publishedBeforeMs: number, takenAt = T0, streamCreated = STREAM.created): Sample {
  return { publishedBefore: new Date(publishedBeforeMs), lastSeq, streamCreated, takenAt };
}

describe('the lost-publication sweep, decided', () => {
  it('releases nothing while the ack floor is behind every sample, and keeps them all', () => {
    const samples = [sample(50, 1_000), sample(80, 2_000)];
    const result = consumedBefore(samples, STREAM, { ackFloorSeq: 49, deliveredSeq: 100 }, T0 + 1_000);
    expect(result.cutoff).to.equal(undefined);
    expect(result.samples).to.deep.equal(samples);
  });

  it('cuts off at the newest sample the ack floor passed, and uses it up with every older one', () => {
    const samples = [sample(50, 1_000), sample(80, 2_000), sample(95, 3_000)];
    const result = consumedBefore(samples, STREAM, { ackFloorSeq: 80, deliveredSeq: 90 }, T0);
    expect(result.cutoff).to.deep.equal(new Date(2_000));
    expect(result.samples).to.deep.equal([samples[2]]);
  });

  it("counts a sample past the stream's end as reaching only the end: NATS lost the tail", () => {
    const samples = [sample(150, 1_000)];
    const result = consumedBefore(samples, STREAM, { ackFloorSeq: 100, deliveredSeq: 100 }, T0);
    expect(result.cutoff).to.deep.equal(new Date(1_000));
  });

  it('passes a sample held delivered but unacknowledged for STUCK_AFTER_MS, not a moment before', () => {
    const samples = [sample(50, 1_000)];
    const held = { ackFloorSeq: 40, deliveredSeq: 50 };
    expect(consumedBefore(samples, STREAM, held, T0 + STUCK_AFTER_MS - 1).cutoff).to.equal(undefined);
    expect(consumedBefore(samples, STREAM, held, T0 + STUCK_AFTER_MS).cutoff).to.deep.equal(new Date(1_000));
  });

  it('does not pass an old sample whose messages were not all delivered yet (a backlog is no loss)', () => {
    const samples = [sample(50, 1_000)];
    const result = consumedBefore(samples, STREAM, { ackFloorSeq: 40, deliveredSeq: 49 }, T0 + 10 * STUCK_AFTER_MS);
    expect(result.cutoff).to.equal(undefined);
  });

  it('passes the samples of a stream created again, whatever its sequences say', () => {
    const samples = [sample(50, 1_000, T0, '2029-12-31T00:00:00Z'), sample(60, 2_000)];
    const result = consumedBefore(samples, STREAM, { ackFloorSeq: 0, deliveredSeq: 0 }, T0);
    expect(result.cutoff).to.deep.equal(new Date(1_000));
    expect(result.samples).to.deep.equal([samples[1]]);
  });

  it("samples the stream's end with the database's time less the publish lag, as of the look", () => {
    const samples = withSample([], { databaseNow: new Date(10_000), publishLagMs: 3_000, stream: STREAM, nowMs: T0 });
    expect(samples).to.deep.equal([sample(100, 7_000, T0)]);
  });

  it('keeps at most MAX_SAMPLES, dropping the oldest', () => {
    let samples: readonly Sample[] = [];
    for (let look = 0; look <= MAX_SAMPLES; look += 1) {
      samples = withSample(samples, { databaseNow: new Date(look), publishLagMs: 0, stream: STREAM, nowMs: T0 + look });
    }
    expect(samples).to.have.length(MAX_SAMPLES);
    expect(samples[0]!.takenAt).to.equal(T0 + 1);
    expect(samples.at(-1)!.takenAt).to.equal(T0 + MAX_SAMPLES);
  });
});
