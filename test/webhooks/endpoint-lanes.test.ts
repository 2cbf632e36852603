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
});
