import { expect } from 'chai';
import { EndpointLanes } from '../../src/delivery/endpointLanes.ts';

/** A request the test settles by hand: answered (any status) or not (a timeout). */
interface Pending {
  readonly endpointId: string;
  readonly item: number;
  settle(answered: boolean): void;
}

function makeLanes(concurrency: number, maxInFlight: number) {
  const pending: Pending[] = [];
  const lanes = new EndpointLanes<number>({
    concurrency,
    maxInFlight,
    send: (endpointId, item) =>
      new Promise<boolean>((resolve) => {
        pending.push({ endpointId, item, settle: resolve });
      }),
    onSlotFreed: () => undefined,
  });
  const inFlightTo = (endpointId: string) => pending.filter((request) => request.endpointId === endpointId).length;
  /** Settles the first request in flight to the endpoint and lets the lanes react. */
  const finish = async (endpointId: string, answered = true) => {
    const index = pending.findIndex((request) => request.endpointId === endpointId);
    const [request] = pending.splice(index, 1);
    request!.settle(answered);
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { lanes, pending, inFlightTo, finish };
}

/** Issue 28, item 3: the worker's cap on requests (sockets) in flight over all endpoints, shared fairly. */
describe('endpoint lanes under the worker-wide socket cap', () => {
  it('never has more requests in flight than the cap, however many endpoints hang', () => {
    const { lanes, pending } = makeLanes(16, 64);
    for (let endpoint = 0; endpoint < 100; endpoint += 1) for (let item = 0; item < 16; item += 1) lanes.admit(`hung-${endpoint}`, item);
    expect(pending.length).to.be.at.most(64);
    expect(lanes.requestsInFlight).to.equal(pending.length);
  });

  it('sends the first request of a healthy endpoint at once beside 100 hung ones holding all they may', () => {
    const { lanes, inFlightTo } = makeLanes(16, 512);
    for (let endpoint = 0; endpoint < 100; endpoint += 1) for (let item = 0; item < 16; item += 1) lanes.admit(`hung-${endpoint}`, item);
    // Every hung endpoint got a request out, and none more than its concurrency.
    for (let endpoint = 0; endpoint < 100; endpoint += 1) expect(inFlightTo(`hung-${endpoint}`)).to.be.within(1, 16);
    // Beyond their first requests, they together hold at most three quarters of the cap.
    expect(lanes.requestsInFlight - 100).to.be.at.most(384);
    expect(lanes.admit('healthy', 1)).to.equal('sent');
    expect(lanes.requestsInFlight).to.be.at.most(512);
  });

  it('keeps slots for newcomers while fewer than a quarter of the cap of endpoints hold requests', () => {
    const { lanes } = makeLanes(16, 64);
    for (let endpoint = 0; endpoint < 15; endpoint += 1) for (let item = 0; item < 16; item += 1) lanes.admit(`hung-${endpoint}`, item);
    expect(lanes.requestsInFlight).to.be.below(64);
    expect(lanes.admit('healthy', 1)).to.equal('sent');
  });

  it('gives a freed slot to the waiting endpoint with the fewest requests in flight', async () => {
    const { lanes, inFlightTo, finish } = makeLanes(16, 4);
    for (let item = 0; item < 8; item += 1) lanes.admit('busy', item);
    expect(inFlightTo('busy')).to.equal(2); // 4 / (1 lane + 1)
    lanes.admit('other', 1);
    expect(inFlightTo('other')).to.equal(1);
    lanes.admit('third', 1);
    expect(lanes.requestsInFlight).to.equal(4);
    expect(lanes.admit('fourth', 1)).to.equal('queued');
    // A request of 'busy' ends: the slot goes to 'fourth', which has none, not to 'busy' and its queue.
    await finish('busy');
    expect(inFlightTo('fourth')).to.equal(1);
    expect(inFlightTo('busy')).to.equal(1);
    expect(lanes.requestsInFlight).to.equal(4);
  });

  it('sends an endpoint up to its own concurrency when it is alone under the cap', () => {
    const { lanes, inFlightTo } = makeLanes(16, 512);
    for (let item = 0; item < 40; item += 1) lanes.admit('alone', item);
    expect(inFlightTo('alone')).to.equal(16);
  });

  it('drains every queue as requests finish, and forgets lanes with nothing left', async () => {
    const { lanes, pending, finish } = makeLanes(2, 3);
    for (let item = 0; item < 5; item += 1) {
      lanes.admit('a', item);
      lanes.admit('b', item);
    }
    const sent: string[] = [];
    while (pending.length > 0) {
      const [next] = pending;
      sent.push(`${next!.endpointId}:${next!.item}`);
      expect(pending.length).to.be.at.most(3);
      await finish(next!.endpointId);
    }
    expect(sent.filter((name) => name.startsWith('a:'))).to.have.length(5);
    expect(sent.filter((name) => name.startsWith('b:'))).to.have.length(5);
    expect(lanes.requestsInFlight).to.equal(0);
    expect(lanes.heldByUnprovenEndpoints()).to.equal(0);
  });

  describe("an endpoint's own limits", () => {
    it('sends an ordered endpoint one request at a time, in the order admitted', async () => {
      const { lanes, pending, finish } = makeLanes(16, 512);
      for (let item = 0; item < 4; item += 1) lanes.admit('ordered', item, { concurrency: 1, ratePerS: undefined });
      const sent: number[] = [];
      while (pending.length > 0) {
        expect(pending).to.have.length(1);
        sent.push(pending[0]!.item);
        await finish('ordered');
      }
      expect(sent).to.deep.equal([0, 1, 2, 3]);
    });

    it('starts a rate-limited endpoint only with permits, asking for them as its queue needs them, once at a time', async () => {
      const asked: number[] = [];
      const grants: Array<(grant: { granted: number; retryInMs: number }) => void> = [];
      const retries: Array<() => void> = [];
      const pending: number[] = [];
      const lanes = new EndpointLanes<number>({
        concurrency: 16,
        maxInFlight: 512,
        send: (_, item) => {
          pending.push(item);
          return Promise.resolve(true);
        },
        onSlotFreed: () => undefined,
        permits: (_, ratePerS, wanted) => {
          expect(ratePerS).to.equal(5);
          asked.push(wanted);
          return new Promise((resolve) => grants.push(resolve));
        },
        later: (_ms, run) => retries.push(run),
      });
      const limits = { concurrency: Number.POSITIVE_INFINITY, ratePerS: 5 };
      for (let item = 0; item < 6; item += 1) expect(lanes.admit('limited', item, limits)).to.equal('queued');
      expect(asked).to.deep.equal([1]);
      expect(pending).to.deep.equal([]);
      // A throttled lane is not one that keeps up: it cannot stop the worker from pulling.
      expect(lanes.heldByUnprovenEndpoints()).to.equal(6);
      grants.shift()!({ granted: 1, retryInMs: 0 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(pending).to.deep.equal([0]);
      expect(asked).to.have.length(2);
      grants.shift()!({ granted: 0, retryInMs: 200 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(pending).to.deep.equal([0]);
      expect(retries).to.have.length(1);
      retries.shift()!();
      grants.shift()!({ granted: 2, retryInMs: 0 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(pending).to.deep.equal([0, 1, 2]);
    });
  });
});
