import { expect } from 'chai';
import { LeaderElector, type LeaseRecord, type LeaseStore } from '../../src/controller/leaderElection.ts';
import { ManualClock } from '../support/manual-clock.ts';

/**
 * A Lease with the API server's optimistic concurrency (409 on a stale resourceVersion), in memory: the
 * election logic's own test. The controller's end-to-end tests run it against the Kubernetes API stand-in.
 */
class MemoryLease {
  record: LeaseRecord | undefined;
  private version = 0;

  storeFor(partitioned: () => boolean = () => false): LeaseStore {
    const fail = () => Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
    return {
      get: async () => {
        if (partitioned()) throw fail();
        return this.record;
      },
      create: async (record) => {
        if (partitioned()) throw fail();
        if (this.record) throw Object.assign(new Error('AlreadyExists'), { statusCode: 409 });
        this.record = { ...record, resourceVersion: String(++this.version) };
        return this.record;
      },
      update: async (record) => {
        if (partitioned()) throw fail();
        if (record.resourceVersion !== this.record?.resourceVersion) throw Object.assign(new Error('Conflict'), { statusCode: 409 });
        this.record = { ...record, resourceVersion: String(++this.version) };
        return this.record;
      },
    };
  }
}

const TIMING = { leaseDurationMs: 400, renewDeadlineMs: 250, retryPeriodMs: 50 };
// The Lease records its duration in whole seconds, as Kubernetes does: 400 ms is held for 1 s.
const LEASE_HELD_MS = Math.ceil(TIMING.leaseDurationMs / 1000) * 1000;

function candidate(identity: string, lease: MemoryLease, clock: ManualClock, partitioned?: () => boolean) {
  const events: string[] = [];
  const elector = new LeaderElector({
    identity,
    store: lease.storeFor(partitioned),
    ...TIMING,
    clock,
    onStartedLeading: () => events.push(`${identity} started`),
    onStoppedLeading: () => events.push(`${identity} stopped`),
  });
  return { elector, events };
}

/** On a clock moved by hand: the timeline is exact however busy the machine is. */
describe('LeaderElector', () => {
  let clock: ManualClock;
  beforeEach(() => {
    clock = new ManualClock();
  });

  it('elects exactly one of two candidates and keeps it while it renews', async () => {
    const lease = new MemoryLease();
    const a = candidate('a', lease, clock);
    const b = candidate('b', lease, clock);
    a.elector.start();
    b.elector.start();
    await clock.advance(600);
    expect([a.elector.isLeader, b.elector.isLeader].filter(Boolean)).to.have.length(1);
    const leader = a.elector.isLeader ? 'a' : 'b';
    expect(lease.record!.holderIdentity).to.equal(leader);
    // Many lease durations later, the same holder: the stand-by never saw the lease go stale.
    await clock.advance(10 * LEASE_HELD_MS);
    expect(lease.record!.holderIdentity).to.equal(leader);
    expect(lease.record!.leaseTransitions).to.equal(0);
    expect([...a.events, ...b.events]).to.deep.equal([`${leader} started`]);
    await a.elector.stop();
    await b.elector.stop();
  });

  it('fails over when the leader stops renewing: it steps down within renewDeadline, the other takes over after leaseDuration', async () => {
    const lease = new MemoryLease();
    let cut = false;
    const a = candidate('a', lease, clock, () => cut);
    a.elector.start();
    await clock.advance(150);
    expect(a.elector.isLeader).to.equal(true);
    const b = candidate('b', lease, clock);
    b.elector.start();
    await clock.advance(200);
    expect(b.elector.isLeader).to.equal(false);

    cut = true; // a can no longer reach the API server
    const lastRenewal = Date.parse(lease.record!.renewTime!);
    const steppedDownAfter = await clock.advanceUntil(() => !a.elector.isLeader, 'a to step down', 10_000);
    expect(b.elector.isLeader, 'never two leaders').to.equal(false);
    const tookOverAfter = steppedDownAfter + (await clock.advanceUntil(() => b.elector.isLeader, 'b to take over', 10_000));
    expect(steppedDownAfter).to.be.at.most(TIMING.renewDeadlineMs + 2 * TIMING.retryPeriodMs);
    expect(tookOverAfter, 'never two leaders').to.be.greaterThan(steppedDownAfter);
    // b measures the lease on its own clock from when it last saw a renewal, which was no earlier than a made it.
    expect(clock.now() - lastRenewal).to.be.at.least(LEASE_HELD_MS);
    expect(clock.now() - lastRenewal).to.be.at.most(LEASE_HELD_MS + 3 * TIMING.retryPeriodMs);
    expect(lease.record!.holderIdentity).to.equal('b');
    expect(lease.record!.leaseTransitions).to.equal(1);
    expect(a.events).to.deep.equal(['a started', 'a stopped']);
    await a.elector.stop();
    await b.elector.stop();
  });

  it('releases the lease on stop so that another candidate takes over at once', async () => {
    const lease = new MemoryLease();
    const a = candidate('a', lease, clock);
    a.elector.start();
    await clock.advance(120);
    const b = candidate('b', lease, clock);
    b.elector.start();
    await clock.advance(100);
    expect(a.elector.isLeader).to.equal(true);
    await a.elector.stop();
    expect(lease.record!.holderIdentity).to.equal(null);
    const tookOverAfter = await clock.advanceUntil(() => b.elector.isLeader, 'b to take over', 10_000);
    // One retry period (with jitter), not a lease duration.
    expect(tookOverAfter).to.be.at.most(TIMING.retryPeriodMs * 1.2 + 1);
    await b.elector.stop();
  });

  it('refuses timings where the old leader could still act when a new one starts', () => {
    const make = (timing: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number }) => () =>
      new LeaderElector({ identity: 'x', store: new MemoryLease().storeFor(), ...timing, onStartedLeading() {}, onStoppedLeading() {} });
    expect(make({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 })).to.throw(/leaseDuration/);
    expect(make({ leaseDurationMs: 15_000, renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).to.throw(/renewDeadline/);
    expect(make({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 })).not.to.throw();
  });
});
