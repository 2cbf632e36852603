import type { CoordinationV1Api, V1Lease } from '@kubernetes/client-node';
import { microTime } from './kubeTime.ts';
import type { LeaseRecord, LeaseStore } from './leaderElection.ts';

/**
 * The leader-election Lease as a coordination.k8s.io/v1 object, with the API server's optimistic concurrency.
 * Its times are MicroTimes (kubeTime.ts): six fractional digits, or the API server refuses the write.
 */
export function kubeLeaseStore(api: CoordinationV1Api, namespace: string, name: string): LeaseStore {
  const toRecord = (lease: V1Lease): LeaseRecord => ({
    holderIdentity: lease.spec?.holderIdentity ?? null,
    leaseDurationSeconds: lease.spec?.leaseDurationSeconds ?? 0,
    acquireTime: lease.spec?.acquireTime ? new Date(lease.spec.acquireTime).toISOString() : null,
    renewTime: lease.spec?.renewTime ? new Date(lease.spec.renewTime).toISOString() : null,
    leaseTransitions: lease.spec?.leaseTransitions ?? 0,
    resourceVersion: lease.metadata?.resourceVersion,
  });
  const toLease = (record: LeaseRecord): V1Lease => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(record.resourceVersion ? { resourceVersion: record.resourceVersion } : {}) },
    spec: {
      holderIdentity: record.holderIdentity ?? undefined,
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: record.acquireTime ? microTime(Date.parse(record.acquireTime)) : undefined,
      renewTime: record.renewTime ? microTime(Date.parse(record.renewTime)) : undefined,
      leaseTransitions: record.leaseTransitions,
    },
  });
  return {
    async get() {
      try {
        return toRecord(await api.readNamespacedLease({ name, namespace }));
      } catch (error) {
        if ((error as { code?: number }).code === 404) return undefined;
        throw error;
      }
    },
    async create(record) {
      return toRecord(await api.createNamespacedLease({ namespace, body: toLease(record) }));
    },
    async update(record) {
      return toRecord(await api.replaceNamespacedLease({ name, namespace, body: toLease(record) }));
    },
  };
}
