import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { loadAll } from 'js-yaml';
import type { KubeObject } from './objectStore.ts';

/**
 * The custom resources of the stand-in, as the API server serves them: defined by the CustomResourceDefinition
 * objects stored at the time of each request, so that applying a newer CRD (kubectl apply --server-side of
 * crds/) changes what is admitted and what is kept at once. Each CRD version's OpenAPI schema validates
 * (ajv) and prunes: fields the schema does not declare are dropped on every write, to the main resource and to
 * /status alike, as apiextensions-apiserver does for structural schemas. An older CRD therefore silently loses
 * the fields a newer controller writes, which is the failure its CRD guard exists for.
 */

export interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly singular?: string;
  readonly shortNames?: readonly string[];
  readonly categories?: readonly string[];
  readonly kind: string;
  readonly namespaced: boolean;
  readonly statusSubresource: boolean;
  /** Defined by a CRD (served as unstructured JSON). */
  readonly custom: boolean;
  readonly validate?: ValidateFunction;
  readonly schema?: SchemaNode;
}

export interface SchemaNode {
  readonly type?: string;
  readonly properties?: Record<string, SchemaNode>;
  readonly items?: SchemaNode;
  readonly additionalProperties?: SchemaNode | boolean;
  readonly 'x-kubernetes-preserve-unknown-fields'?: boolean;
  readonly 'x-kubernetes-validations'?: Array<{ rule: string; message?: string }>;
}

export const CRD_COLLECTION = 'apiextensions.k8s.io/v1/customresourcedefinitions';

/** The CRD documents in the YAML files of these directories, in file order. */
export function readCrdFiles(directories: readonly string[]): KubeObject[] {
  return directories.flatMap((directory) =>
    readdirSync(directory)
      .filter((name) => name.endsWith('.yaml'))
      .sort()
      .flatMap((file) =>
        (loadAll(readFileSync(join(directory, file), 'utf8')) as KubeObject[]).filter(
          (document) => document?.kind === 'CustomResourceDefinition',
        ),
      ),
  );
}

/** Types of stored CRDs, compiled once per CRD resourceVersion. */
export class CustomResourceTypes {
  private readonly ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  private readonly compiled = new Map<string, ResourceType[]>();

  typesOf(crds: readonly KubeObject[]): ResourceType[] {
    return crds.flatMap((crd) => {
      const key = `${crd.metadata.uid}@${crd.metadata.resourceVersion}`;
      let types = this.compiled.get(key);
      if (!types) {
        types = this.compile(crd);
        this.compiled.set(key, types);
      }
      return types;
    });
  }

  private compile(crd: KubeObject): ResourceType[] {
    const spec = crd.spec as {
      group: string;
      scope: string;
      names: { plural: string; singular?: string; kind: string; shortNames?: string[]; categories?: string[] };
      versions: Array<{ name: string; served?: boolean; subresources?: { status?: object }; schema: { openAPIV3Schema: SchemaNode } }>;
    };
    return spec.versions
      .filter((version) => version.served !== false)
      .map((version) => ({
        group: spec.group,
        version: version.name,
        plural: spec.names.plural,
        singular: spec.names.singular,
        shortNames: spec.names.shortNames ?? [],
        categories: spec.names.categories ?? [],
        kind: spec.names.kind,
        namespaced: spec.scope === 'Namespaced',
        statusSubresource: version.subresources?.status !== undefined,
        custom: true,
        validate: this.ajv.compile(version.schema.openAPIV3Schema),
        schema: version.schema.openAPIV3Schema,
      }));
  }
}

/**
 * Drops what the structural schema does not declare: unknown properties of every object node (unless it
 * preserves unknown fields or types them with additionalProperties), inside arrays too. apiVersion, kind and
 * metadata of the root are the API server's own and are kept.
 */
export function prune(object: KubeObject, schema: SchemaNode): KubeObject {
  const { apiVersion, kind, metadata, ...rest } = object;
  const pruned = pruneNode(rest, { ...schema, properties: omitRootFields(schema.properties) }) as Record<string, unknown>;
  return { apiVersion, kind, metadata, ...pruned };
}

function omitRootFields(properties: Record<string, SchemaNode> | undefined): Record<string, SchemaNode> | undefined {
  if (!properties) return properties;
  const { apiVersion: _apiVersion, kind: _kind, metadata: _metadata, ...rest } = properties;
  return rest;
}

function pruneNode(value: unknown, schema: SchemaNode): unknown {
  if (Array.isArray(value)) return schema.items ? value.map((item) => pruneNode(item, schema.items!)) : value;
  if (value === null || typeof value !== 'object' || schema['x-kubernetes-preserve-unknown-fields']) return value;
  const additional = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined;
  if (!schema.properties && !additional) return value;
  const result: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const childSchema = schema.properties?.[key] ?? additional;
    if (childSchema) result[key] = pruneNode(child, childSchema);
  }
  return result;
}
