import { z } from 'zod';
import { errorSchema, rateLimitedSchema } from './apiSchemas.ts';

export interface OpenApiContribution {
  /** Paths relative to the public base, e.g. `/audit/events`. */
  readonly paths: Record<string, Record<string, unknown>>;
  /** zod schemas (with `.meta({ id })`) referenced from those paths as `#/components/schemas/<id>`. */
  readonly schemas?: readonly z.ZodType[];
}

export const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
export const json = (schema: object) => ({ 'application/json': { schema } });

/** Responses every authenticated endpoint can give. */
export function standardErrorResponses(scope: string): Record<string, unknown> {
  return {
    '401': { description: 'Missing, malformed, unknown or revoked key (one identical body).', content: json(ref('Error')) },
    '403': { description: `The key lacks the ${scope} scope.`, content: json(ref('Error')) },
    '422': { description: 'Invalid parameters.', content: json(ref('Error')) },
    '429': {
      description: 'Rate limit exceeded.',
      headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait.' } },
      content: json(ref('RateLimited')),
    },
    '503': { description: 'A dependency is unavailable; retry later.', content: json(ref('Error')) },
  };
}

/** OpenAPI parameters generated from a strict zod object of query parameters. */
export function queryParameters(schema: z.ZodObject): object[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const { description, ...fieldSchema } = z.toJSONSchema(field as z.ZodType, { target: 'draft-2020-12', io: 'input' }) as {
      description?: string;
      $schema?: string;
    };
    delete fieldSchema.$schema;
    return { name, in: 'query', required: !(field as z.ZodType).safeParse(undefined).success, description, schema: fieldSchema };
  });
}

/** The OpenAPI 3.1 document of the public API, built from the same zod schemas that validate requests. */
export function buildOpenApiDocument(version: string, contributions: readonly OpenApiContribution[] = []): object {
  const shared: OpenApiContribution = { paths: {}, schemas: [errorSchema, rateLimitedSchema] };
  const all = [shared, ...contributions];
  const registry = z.registry<{ id: string }>();
  for (const schema of all.flatMap((contribution) => contribution.schemas ?? [])) {
    const id = (schema.meta() as { id?: string } | undefined)?.id;
    if (id && !registry.has(schema)) registry.add(schema, { id });
  }
  const { schemas } = z.toJSONSchema(registry, { target: 'draft-2020-12', uri: (id) => `#/components/schemas/${id}` });
  for (const schema of Object.values(schemas) as Array<{ $schema?: string; $id?: string }>) {
    delete schema.$schema;
    delete schema.$id;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Audit Trail API',
      version,
      description: 'Read, export and subscribe to a tenant audit trail. All paths need `Authorization: Bearer <API key>`.',
    },
    servers: [{ url: '/api/v2/public' }],
    components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } }, schemas },
    paths: Object.assign({}, ...all.map((contribution) => contribution.paths)),
  };
}
