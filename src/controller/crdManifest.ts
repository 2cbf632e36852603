import { z } from 'zod';
import { GROUP, SCHEMA_VERSION_ANNOTATION, VERSION, type ResourceKind } from './resources.ts';

type Schema = Record<string, unknown>;

/**
 * Deleting a CRD deletes every resource of its kind, and the controller then revokes every key and deletes
 * every endpoint they stood for. So each tool that may delete what it installed is told to leave the CRDs:
 * `helm uninstall` (templated copies; Helm never deletes crds/ anyway), Argo CD when its Application is
 * deleted or the file leaves Git, Flux when a Kustomization applying crds/ is deleted or pruned.
 * docs/kubernetes.md says how to remove them on purpose; the chart drops these with crds.keep=false.
 */
const KEEP_ANNOTATIONS: Readonly<Record<string, string>> = {
  'helm.sh/resource-policy': 'keep',
  'argocd.argoproj.io/sync-options': 'Delete=false,Prune=false',
  'kustomize.toolkit.fluxcd.io/prune': 'disabled',
};

/**
 * The CustomResourceDefinition of a kind, its openAPIV3Schema generated from the zod definitions.
 * Kubernetes wants a structural schema: every node typed, no `additionalProperties: false` next to
 * `properties` (unknown fields are pruned instead), no `$schema`; zod's OpenAPI 3.0 output is close and
 * is adjusted here.
 */
export function crdManifest(resource: ResourceKind): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${resource.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/name': 'audit-trail' },
      annotations: { [SCHEMA_VERSION_ANNOTATION]: String(resource.schemaVersion), ...KEEP_ANNOTATIONS },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: resource.kind,
        listKind: `${resource.kind}List`,
        plural: resource.plural,
        singular: resource.singular,
        shortNames: [...resource.shortNames],
        categories: ['audit-trail'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: resource.printerColumns.map((column) => ({ ...column })),
          schema: {
            openAPIV3Schema: {
              description: resource.description,
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: structural(toOpenApi(resource.spec)),
                status: structural(toOpenApi(resource.status)),
              },
            },
          },
        },
      ],
    },
  };
}

function toOpenApi(schema: z.ZodType): Schema {
  return z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as Schema;
}

function structural(node: Schema): Schema {
  const result: Schema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema' || key === 'additionalProperties' || key === 'id') continue;
    if (key === 'properties') {
      result.properties = Object.fromEntries(
        Object.entries(value as Record<string, Schema>).map(([name, child]) => [name, structural(child)]),
      );
    } else if (key === 'items') {
      result.items = structural(value as Schema);
    } else if (key === 'pattern') {
      // Kubernetes evaluates patterns as ECMA 262 without flags; zod's regex source is that already.
      result.pattern = value;
    } else {
      result[key] = value;
    }
  }
  return result;
}
