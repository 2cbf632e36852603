import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Logger } from '../platform/logger.ts';
import { PUBLIC_PREFIX } from './publicApp.ts';
import { StaticAssets } from './staticAssets.ts';
import type { RequestState } from './state.ts';

/** `make build` writes the page here (scripts/build-api-reference.ts); beside src/ and dist/ alike. */
const referenceAssetsDirectory = fileURLToPath(new URL('../../dist/api-reference/', import.meta.url));

/**
 * The reference page's Content-Security-Policy, the portal's less connections it does not need: scripts and
 * styles from this origin only (no inline script or style element), images from it or data: URIs (Swagger
 * UI's stylesheet draws its icons with them), requests to this origin only (the OpenAPI document, and the
 * calls of "Try it out"), never framed.
 */
export const API_REFERENCE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The API reference at /api/v2/public/docs/: Swagger UI rendering the OpenAPI document the service serves
 * beside it, from files built into dist/ (no other origin at run time). Open, like the document: it shows
 * nothing the document does not.
 */
export function apiReferencePages(options: { log: Logger; directory?: string }): Router<RequestState> {
  const assets = new StaticAssets(options.directory ?? referenceAssetsDirectory, "API reference's", options.log);
  const router = new Router<RequestState>({ prefix: `${PUBLIC_PREFIX}/docs` });

  router.use(async (ctx, next) => {
    ctx.set('Content-Security-Policy', API_REFERENCE_CSP);
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
    await next();
  });

  // The page's references are relative (./swagger-ui-….js, ../openapi.json), so it lives at docs/.
  router.get('/', (ctx) => {
    if (ctx.path.endsWith('/')) return assets.serve(ctx, 'index.html');
    ctx.status = 308;
    ctx.redirect(`${PUBLIC_PREFIX}/docs/`);
  });
  router.get('/:file', (ctx) => assets.serve(ctx, ctx.params.file!));

  return router;
}
