import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ResponseContext,
  SelfDecodingBody,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
  type KubeConfig,
  type RequestContext,
} from '@kubernetes/client-node';

/** The API clients the controller writes with. */
export interface KubeClients {
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly coordination: CoordinationV1Api;
}

/** A write the API server refused: which object (method and path, the name of an object being created) and why. */
export interface RefusedWrite {
  readonly method: string;
  /** The request path: it names the object (or, for a create, its collection). */
  readonly path: string;
  /** For a create: metadata.name, or metadata.generateName followed by '*'. */
  readonly name?: string;
  readonly code: number;
  /** The Status's reason (BadRequest, Invalid, Forbidden...) and message, as the API server gave them. */
  readonly reason: string;
  readonly message: string;
}

export interface WriteObserver {
  refused(write: RefusedWrite): void;
  accepted(method: string, path: string): void;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * 4xx answers that are the ordinary course of a controller's writes, not refusals: 404 (the object is gone;
 * callers treat it), 409 (optimistic concurrency: retried from a fresh read) and 429 (throttled, retried).
 */
const ORDINARY = new Set([404, 409, 429]);

/**
 * The controller's clients, on one HTTP library that sees every request they send and its answer: the single
 * place where a write the API server refuses (any other 4xx: a 400 for a body it cannot decode, 422 for an
 * invalid object, 403 for missing RBAC) is noticed, whichever module made it. The refusal's Status body is
 * read once and handed on unchanged, so callers still get their ApiException with it.
 */
export function kubeClients(kubeConfig: KubeConfig, observer: WriteObserver): KubeClients {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const transport = createConfiguration().httpApi;
  const httpApi = wrapHttpLibrary({
    async send(request: RequestContext): Promise<ResponseContext> {
      const response = await transport.send(request).toPromise();
      const method = String(request.getHttpMethod());
      if (!WRITES.has(method)) return response;
      const path = new URL(request.getUrl()).pathname;
      const code = response.httpStatusCode;
      if (code < 400) {
        observer.accepted(method, path);
        return response;
      }
      if (code >= 500 || ORDINARY.has(code)) return response;
      const text = await response.body.text();
      observer.refused({ method, path, ...createdName(method, request.getBody()), code, ...statusOf(text) });
      return new ResponseContext(code, response.headers, new SelfDecodingBody(Promise.resolve(Buffer.from(text))));
    },
  });
  const configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kubeConfig },
    httpApi,
  });
  return {
    core: new CoreV1Api(configuration),
    custom: new CustomObjectsApi(configuration),
    coordination: new CoordinationV1Api(configuration),
  };
}

function createdName(method: string, body: unknown): { name?: string } {
  if (method !== 'POST' || typeof body !== 'string') return {};
  try {
    const metadata = (JSON.parse(body) as { metadata?: { name?: string; generateName?: string } }).metadata;
    const name = metadata?.name || (metadata?.generateName ? `${metadata.generateName}*` : undefined);
    return name ? { name } : {};
  } catch {
    return {};
  }
}

/** The reason and message of a metav1.Status body (what the API server answers a refusal with). */
export function statusOf(body: unknown): { reason: string; message: string } {
  try {
    const status = (typeof body === 'string' ? JSON.parse(body) : body) as { reason?: unknown; message?: unknown } | undefined;
    return {
      reason: typeof status?.reason === 'string' ? status.reason : 'Unknown',
      message: typeof status?.message === 'string' ? status.message.slice(0, 1000) : '',
    };
  } catch {
    return { reason: 'Unknown', message: String(body).slice(0, 200) };
  }
}
