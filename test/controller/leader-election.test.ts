import { expect } from 'chai';
import { LeaderElector, type LeaseRecord, type LeaseStore } from '../../src/controller/leaderElection.ts';

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
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function candidate(identity: string, lease: MemoryLease, partitioned?: () => boolean) {
  const events: string[] = [];
  const elector = new LeaderElector({
    identity,
    store: lease.storeFor(partitioned),
    ...TIMING,
    onStartedLeading: () => events.push(`${identity} started`),
    onStoppedLeading: () => events.push(`${identity} stopped`),
  });
  return { elector, events };
}

describe('LeaderElector', function () {
  this.timeout(10_000);

  it('elects exactly one of two candidates and keeps it while it renews', async () => {
    const lease = new MemoryLease();
    const a = candidate('a', lease);
    const b = candidate('b', lease);
    a.elector.start();
    b.elector.start();
    await sleep(600);
    expect([a.elector.isLeader, b.elector.isLeader].filter(Boolean)).to.have.length(1);
    const leader = a.elector.isLeader ? 'a' : 'b';
    expect(lease.record!.holderIdentity).to.equal(leader);
    await sleep(600);
    expect(lease.record!.holderIdentity).to.equal(leader);
    expect(lease.record!.leaseTransitions).to.equal(0);
    await a.elector.stop();
    await b.elector.stop();
  });

  it('fails over when the leader stops renewing: it steps down within renewDeadline, the other takes over after leaseDuration', async () => {
    const lease = new MemoryLease();
    let cut = false;
    const a = candidate('a', lease, () => cut);
    a.elector.start();
    await sleep(150);
    expect(a.elector.isLeader).to.equal(true);
    const b = candidate('b', lease);
    b.elector.start();
    await sleep(200);
    expect(b.elector.isLeader).to.equal(false);

    cut = true; // a can no longer reach the API server
    const cutAt = Date.now();
    while (a.elector.isLeader) await sleep(10);
    const steppedDownAfter = Date.now() - cutAt;
    while (!b.elector.isLeader) await sleep(10);
    const tookOverAfter = Date.now() - cutAt;
    expect(steppedDownAfter).to.be.at.most(TIMING.renewDeadlineMs + 2 * TIMING.retryPeriodMs);
    expect(tookOverAfter, 'never two leaders').to.be.greaterThan(steppedDownAfter);
    expect(tookOverAfter).to.be.at.least(TIMING.leaseDurationMs - TIMING.renewDeadlineMs);
    expect(lease.record!.holderIdentity).to.equal('b');
    expect(lease.record!.leaseTransitions).to.equal(1);
    expect(a.events).to.deep.equal(['a started', 'a stopped']);
    await a.elector.stop();
    await b.elector.stop();
  });

  it('releases the lease on stop so that another candidate takes over at once', async () => {
    const lease = new MemoryLease();
    const a = candidate('a', lease);
    a.elector.start();
    await sleep(120);
    const b = candidate('b', lease);
    b.elector.start();
    await sleep(100);
    expect(a.elector.isLeader).to.equal(true);
    const stoppedAt = Date.now();
    await a.elector.stop();
    expect(lease.record!.holderIdentity).to.equal(null);
    while (!b.elector.isLeader) await sleep(5);
    expect(Date.now() - stoppedAt).to.be.below(TIMING.leaseDurationMs);
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
