import type { KubernetesObject } from '@kubernetes/client-node';
import { TENANT_ID_PATTERN } from '../events/eventFields.ts';

/**
 * Namespaces bound to tenants (docs/kubernetes.md "Tenancy"). A cluster administrator binds a namespace to one
 * tenant with this annotation on the Namespace object; in a bound namespace the controller refuses every resource
 * that acts for another tenant (an ApiKey, WebhookEndpoint, RetentionPolicy or LegalHold of another tenantId, an
 * AuditLogStream for another tenant or for all of them), and with CONTROLLER_REQUIRE_TENANT_BINDING every
 * resource of an unbound namespace. Namespaces are cluster-scoped: the built-in admin and edit roles a
 * namespace's owners get cannot change them, so the annotation is the cluster administrator's word, as Pod
 * Security Admission's labels are. An annotation, not a label: a tenant id may be 64 characters long and end
 * with '-' or '_', which a label value cannot. On the Namespace itself, not in a binding resource: a namespace
 * deleted and re-created by someone else starts unbound, never inheriting a binding that named it.
 */
export const TENANT_ANNOTATION = 'audittrail.dev/tenant';

/** What the controller knows of a namespace's binding. */
export type NamespaceBinding =
  | { readonly state: 'bound'; readonly tenant: string }
  | { readonly state: 'unbound' }
  /** The annotation is there but names no valid tenant: nothing in the namespace is reconciled. */
  | { readonly state: 'invalid'; readonly value: string }
  /** The Namespace could not be read (missing, or RBAC refuses it): fail closed. */
  | { readonly state: 'unknown' };

export function bindingOf(namespace: KubernetesObject | undefined): NamespaceBinding {
  if (!namespace) return { state: 'unknown' };
  const value = namespace.metadata?.annotations?.[TENANT_ANNOTATION];
  if (value === undefined) return { state: 'unbound' };
  return TENANT_ID_PATTERN.test(value) ? { state: 'bound', tenant: value } : { state: 'invalid', value };
}

/** The tenants a resource acts for: spec.tenantId, an AuditLogStream's spec.tenantIds, or every tenant (allTenants). */
export function tenantsOf(object: KubernetesObject): readonly string[] | 'all' {
  const spec = (object as { spec?: { tenantId?: unknown; tenantIds?: unknown; allTenants?: unknown } }).spec;
  if (spec?.allTenants === true) return 'all';
  if (Array.isArray(spec?.tenantIds)) return spec.tenantIds.map(String);
  return typeof spec?.tenantId === 'string' ? [spec.tenantId] : [];
}

export interface TenancyProblem {
  readonly reason: 'TenantNotBoundToNamespace' | 'NamespaceNotBound' | 'InvalidTenantBinding' | 'NamespaceUnreadable';
  readonly message: string;
}

/**
 * Why a resource may not be reconciled in its namespace, or undefined when it may. A resource refused here is
 * not claimed, and nothing is written to the database for it.
 */
export function tenancyProblem(
  kind: string,
  namespace: string,
  binding: NamespaceBinding,
  tenants: readonly string[] | 'all',
  requireBinding: boolean,
): TenancyProblem | undefined {
  switch (binding.state) {
    case 'unknown':
      return {
        reason: 'NamespaceUnreadable',
        message:
          `Namespace ${namespace} cannot be read, so whether it is bound to a tenant (annotation ${TENANT_ANNOTATION}) is unknown; ` +
          'nothing in it is reconciled until it can be. The controller needs list and watch on namespaces (the chart grants them).',
      };
    case 'invalid':
      return {
        reason: 'InvalidTenantBinding',
        message: `Namespace ${namespace} has annotation ${TENANT_ANNOTATION}: ${JSON.stringify(binding.value)}, which is not a tenant id; nothing in it is reconciled until a cluster administrator corrects it.`,
      };
    case 'unbound':
      return requireBinding
        ? {
            reason: 'NamespaceNotBound',
            message: `Namespace ${namespace} is bound to no tenant, and this controller requires a binding (controller.requireTenantBinding): a cluster administrator binds it with kubectl annotate namespace ${namespace} ${TENANT_ANNOTATION}=<tenant>.`,
          }
        : undefined;
    case 'bound': {
      const others = tenants === 'all' ? ['every tenant'] : tenants.filter((tenant) => tenant !== binding.tenant);
      if (others.length === 0) return undefined;
      return {
        reason: 'TenantNotBoundToNamespace',
        message: `Namespace ${namespace} is bound to tenant ${binding.tenant} (annotation ${TENANT_ANNOTATION}); this ${kind} acts for ${others.join(', ')}, so it is refused and nothing is written for it. Create it in a namespace bound to that tenant.`,
      };
    }
  }
}
