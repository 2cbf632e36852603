import { z } from 'zod';
import { errorSchema, rateLimitedSchema } from './apiSchemas.ts';

export interface OpenApiContribution {
  /** Paths relative to the public base, e.g. `/audit/events`. */
  readonly paths: Record<string, Record<string, unknown>>;
  /** zod schemas (with `.meta({ id })`) referenced from those paths as `#/components/schemas/<id>`. */
  readonly schemas?: readonly z.ZodType[];
  /** OpenAPI 3.1 `webhooks`: requests the service makes to its customers (the webhook deliveries). */
  readonly webhooks?: Record<string, Record<string, unknown>>;
}

export const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
export const json = (schema: object) => ({ 'application/json': { schema } });

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** Response headers of the public API, referenced from the responses that carry them. */
const HEADERS = {
  'RateLimit-Limit': {
    description: "The key's budget for this kind of request (read or write) per window.",
    required: true,
    schema: { type: 'integer' },
  },
  'RateLimit-Remaining': { description: 'Requests of this kind left in the current window.', required: true, schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', required: true, schema: { type: 'integer' } },
  'Retry-After': { description: 'Seconds to wait; a request after them succeeds.', required: true, schema: { type: 'integer' } },
  'X-Service-Truncated': {
    description: 'true when the export hit its row cap: continue with until set to the timestamp of the last event.',
    required: true,
    schema: { type: 'boolean' },
  },
};

export type ResponseHeader = keyof typeof HEADERS;

/**
 * A response to an authenticated request. The rate limiter runs right after authentication, so every such
 * response carries the RateLimit-* headers, whatever its status.
 */
export function authenticatedResponse(
  response: { description: string; content?: object; headers?: Record<string, object> },
  ...sharedHeaders: ResponseHeader[]
): object {
  const names: ResponseHeader[] = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', ...sharedHeaders];
  return { ...response, headers: { ...Object.fromEntries(names.map((name) => [name, headerRef(name)])), ...response.headers } };
}

/** Responses every authenticated endpoint can give. */
export function standardErrorResponses(scope: string): Record<string, unknown> {
  return {
    // Before the rate limiter: no RateLimit-* headers.
    '401': { description: 'Missing, malformed, unknown or revoked key (one identical body).', content: json(ref('Error')) },
    '403': authenticatedResponse({ description: `The key lacks the ${scope} scope.`, content: json(ref('Error')) }),
    '422': authenticatedResponse({ description: 'Invalid parameters.', content: json(ref('Error')) }),
    '429': authenticatedResponse({ description: 'Rate limit exceeded.', content: json(ref('RateLimited')) }, 'Retry-After'),
    // Possibly before the rate limiter (a key not yet cached cannot be verified without Postgres).
    '503': { description: 'A dependency is unavailable; retry later.', content: json(ref('Error')) },
  };
}

/**
 * OpenAPI parameters generated from a strict zod object of query parameters. Typed as a client writes
 * them (the schemas' output: `limit` an integer, `phi_involved` a boolean); on the wire they are text,
 * which the same schemas decode exactly (`limit=abc` is still a 422).
 */
export function queryParameters(schema: z.ZodObject): object[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const { description, ...fieldSchema } = z.toJSONSchema(field as z.ZodType, { target: 'draft-2020-12', io: 'output' }) as {
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
    components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer' } }, schemas, headers: HEADERS },
    paths: Object.assign({}, ...all.map((contribution) => contribution.paths)),
    webhooks: Object.assign({}, ...all.map((contribution) => contribution.webhooks ?? {})),
  };
}

/** A route as a router serves it: upper-case method and koa path (`/audit/events/:event_id`). */
export interface ServedRoute {
  readonly method: string;
  readonly path: string;
}

/** The routes of a router, as `method path`; HEAD, which the router adds to every GET, is left out. */
export function servedRoutes(router: {
  readonly stack: ReadonlyArray<{ readonly path: string | RegExp; readonly methods: readonly string[] }>;
}): ServedRoute[] {
  return router.stack.flatMap((layer) =>
    typeof layer.path === 'string'
      ? layer.methods.filter((method) => method !== 'HEAD').map((method) => ({ method, path: layer.path as string }))
      : [],
  );
}

/**
 * Routes and their documentation are written side by side, in each feature's module; this keeps them
 * from drifting apart. Returns what one has and the other lacks, in both directions, so the public app
 * can refuse to start with an undocumented route or a documented path that nothing serves.
 */
export function undocumentedRoutes(routes: readonly ServedRoute[], contribution: OpenApiContribution): string[] {
  const served = new Set(routes.map(({ method, path }) => `${method.toLowerCase()} ${path.replace(/[:*](\w+)/g, '{$1}')}`));
  const documented = new Set(
    Object.entries(contribution.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method} ${path}`)),
  );
  return [
    ...[...served].filter((route) => !documented.has(route)).map((route) => `served but not documented: ${route}`),
    ...[...documented].filter((route) => !served.has(route)).map((route) => `documented but not served: ${route}`),
  ];
}
