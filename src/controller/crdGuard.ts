import { ApiextensionsV1Api, ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { WATCH_BACKOFF, type BackoffPolicy } from './backoff.ts';
import { GROUP, SCHEMA_VERSION_ANNOTATION, type ResourceKind } from './resources.ts';
import { restartOnError } from './watchRestart.ts';
import { controllerMetrics } from './controllerMetrics.ts';

/**
 * The controller never reconciles a kind whose installed CRD is older than the schema it writes. Helm never
 * upgrades crds/, so a plain `helm upgrade` keeps the previous CRDs, and the API server then prunes every
 * field the old schema lacks: a status.rotateRequest pruned is a rotation requested again at every reconcile
 * (a storm of keys), a spec.controllerClass pruned hands a resource to the wrong controller. Each CRD says
 * which schema it is (SCHEMA_VERSION_ANNOTATION, generated from resources.ts); the guard reads it at start and
 * follows it with a watch (one per CRD, by name, so RBAC can name them), on every replica whether it leads or
 * not, so readiness tells the truth everywhere. A kind is reconciled only while its CRD is current; when that
 * changes the kind's resources are reconciled again at once.
 */

export type CrdState =
  | { readonly state: 'unread' }
  | { readonly state: 'current'; readonly installed: number }
  /** installed: undefined when the CRD carries no version at all (it predates them). */
  | { readonly state: 'outdated'; readonly installed: number | undefined }
  | { readonly state: 'missing' }
  | { readonly state: 'unreadable'; readonly cause: string };

function crdNameOf(resource: ResourceKind): string {
  return `${resource.plural}.${GROUP}`;
}

/** What an installed CRD (or its absence) means for a kind, by the schema version it carries. */
export function assessCrd(crd: KubernetesObject | undefined, resource: ResourceKind): CrdState {
  if (!crd) return { state: 'missing' };
  const marked = crd.metadata?.annotations?.[SCHEMA_VERSION_ANNOTATION];
  const installed = marked !== undefined && /^[0-9]+$/.test(marked) ? Number(marked) : undefined;
  return installed !== undefined && installed >= resource.schemaVersion
    ? { state: 'current', installed }
    : { state: 'outdated', installed };
}

const HOW_TO_UPGRADE =
  "Upgrade the CRDs: kubectl apply --server-side --force-conflicts -f crds/ (the chart's crds/ of this version), " +
  'or let the chart manage them (crds.enabled=true); docs/operations.md "CRD upgrades".';

/** Why a kind may not be reconciled: a condition reason and a message for logs, status, Events and readiness. */
export interface CrdProblem {
  readonly reason: 'CRDOutdated' | 'CRDMissing' | 'CRDUnreadable';
  readonly message: string;
}

/** The problem a CRD state poses, or undefined when the kind may be reconciled. */
export function crdProblem(resource: ResourceKind, state: CrdState): CrdProblem | undefined {
  const name = crdNameOf(resource);
  switch (state.state) {
    case 'current':
      return undefined;
    case 'unread':
      return { reason: 'CRDUnreadable', message: `CRD ${name} has not been read yet; nothing is reconciled until it has.` };
    case 'missing':
      return { reason: 'CRDMissing', message: `CRD ${name} is not installed. ${HOW_TO_UPGRADE}` };
    case 'outdated': {
      const installed =
        state.installed === undefined ? 'carries no schema version (it predates them)' : `is at schema version ${state.installed}`;
      return {
        reason: 'CRDOutdated',
        message:
          `CRD ${name} ${installed}; this controller needs version ${resource.schemaVersion}. The API server drops the fields a ` +
          `newer schema adds, so no ${resource.kind} is reconciled (no key minted, rotated or revoked, no endpoint registered ` +
          `or deleted) until the CRD is upgraded. ${HOW_TO_UPGRADE}`,
      };
    }
    case 'unreadable':
      return {
        reason: 'CRDUnreadable',
        message:
          `CRD ${name} cannot be read (${state.cause}); nothing is reconciled until it can. The controller needs get, list ` +
          `and watch on the customresourcedefinition ${name} (the chart's RBAC grants them).`,
      };
  }
}

export interface CrdGuardOptions {
  readonly kubeConfig: KubeConfig;
  readonly kinds: readonly ResourceKind[];
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
  readonly watchBackoff?: BackoffPolicy;
  /** A kind's CRD changed state after it was first read: its resources are to be reconciled again. */
  readonly onChange: (resource: ResourceKind) => void;
}

const CRDS_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

export class CrdGuard {
  private readonly options: CrdGuardOptions;
  private readonly api: ApiextensionsV1Api;
  private readonly states = new Map<ResourceKind, CrdState>();
  private informers: Array<ListWatch<KubernetesObject>> = [];
  private running = false;
  /** Resolved once no kind is 'unread' any more (each CRD read, or refused), or on stop. */
  private firstRead: { promise: Promise<void>; resolve: () => void };

  constructor(options: CrdGuardOptions) {
    this.options = options;
    this.api = options.kubeConfig.makeApiClient(ApiextensionsV1Api);
    for (const resource of options.kinds) this.states.set(resource, { state: 'unread' });
    this.firstRead = Promise.withResolvers<void>();
  }

  /** Reads every CRD and follows them from then on; resolves once each has been read (or failed to be). */
  start(): Promise<void> {
    this.running = true;
    for (const resource of this.options.kinds) this.follow(resource);
    return this.firstRead.promise;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.firstRead.resolve();
    const informers = this.informers;
    this.informers = [];
    await Promise.all(informers.map((informer) => informer.stop()));
  }

  /** Why the kind may not be reconciled now, or undefined. */
  problem(resource: ResourceKind): CrdProblem | undefined {
    return crdProblem(resource, this.states.get(resource) ?? { state: 'unread' });
  }

  /** Not ready while any CRD is not current: a rollout with stale CRDs stops at the first new pod. */
  readonly readiness = {
    name: 'crds',
    check: async (): Promise<void> => {
      const problems = this.options.kinds.flatMap((resource) => this.problem(resource)?.message ?? []);
      if (problems.length > 0) throw new Error(problems.join(' '));
    },
  };

  private follow(resource: ResourceKind): void {
    const name = crdNameOf(resource);
    const selector = `metadata.name=${name}`;
    let informer: ListWatch<KubernetesObject> | undefined;
    const assess = () => this.set(resource, assessCrd(informer!.get(name), resource));
    const list = async () => {
      const listed = await this.api.listCustomResourceDefinition({ fieldSelector: selector });
      // A list with nothing in it (the CRD is missing) announces nothing: assess once ListWatch has taken it in.
      setImmediate(assess);
      return listed;
    };
    informer = new ListWatch<KubernetesObject>(CRDS_PATH, new Watch(this.options.kubeConfig), list, false, undefined, selector);
    for (const event of ['add', 'update', 'delete'] as const) informer.on(event, assess);
    restartOnError(informer, {
      what: name,
      policy: this.options.watchBackoff ?? WATCH_BACKOFF,
      log: this.options.log,
      active: () => this.running,
      onError: (error) => {
        // What was read stays true through a cut watch; a CRD never read, or refused, cannot be vouched for.
        const code = (error as { code?: unknown }).code;
        const refused = code === 401 || code === 403;
        if (refused || this.states.get(resource)?.state === 'unread') {
          this.set(resource, {
            state: 'unreadable',
            cause: typeof code === 'number' ? `the Kubernetes API answered ${code}` : String(error),
          });
        }
      },
    });
    this.informers.push(informer);
    informer.start().catch(() => undefined);
  }

  private set(resource: ResourceKind, state: CrdState): void {
    const before = this.states.get(resource);
    this.states.set(resource, state);
    const name = crdNameOf(resource);
    if (this.options.metrics) controllerMetrics(this.options.metrics).crdOutdated.set({ crd: name }, state.state === 'current' ? 0 : 1);
    if (JSON.stringify(before) === JSON.stringify(state)) return;
    const problem = crdProblem(resource, state);
    if (problem) this.options.log.error({ crd: name, required_schema_version: resource.schemaVersion }, problem.message);
    else this.options.log.info({ crd: name, schema_version: (state as { installed?: number }).installed }, `CRD ${name} is current`);
    if (before?.state !== 'unread') this.options.onChange(resource);
    if ([...this.states.values()].every((known) => known.state !== 'unread')) this.firstRead.resolve();
  }
}
