import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Logger } from '../platform/logger.ts';
import { StaticAssets } from './staticAssets.ts';
import type { RequestState } from './state.ts';

/** `make build` writes the portal's assets here (scripts/build-portal.ts); beside src/ and dist/ alike. */
const portalAssetsDirectory = fileURLToPath(new URL('../../dist/portal/', import.meta.url));

/**
 * The portal's Content-Security-Policy: scripts, styles and connections from our own origin only (no
 * inline script, no other origin), nothing else loadable, and framing only by the origins an operator
 * listed in PORTAL_FRAME_ANCESTORS (none by default).
 */
export function portalContentSecurityPolicy(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    `frame-ancestors ${frameAncestors.length > 0 ? frameAncestors.join(' ') : "'none'"}`,
  ].join('; ');
}

/**
 * Serves the portal under /portal/: its page and the hashed assets it names, read once at start. Every
 * answer carries the CSP; the page itself is never cached (it names the current assets), the assets are
 * immutable (their names change with their content).
 */
export function portalPages(options: { frameAncestors: readonly string[]; log: Logger; directory?: string }): Router<RequestState> {
  const assets = new StaticAssets(options.directory ?? portalAssetsDirectory, "portal's", options.log);
  const policy = portalContentSecurityPolicy(options.frameAncestors);
  const router = new Router<RequestState>();

  router.use(async (ctx, next) => {
    ctx.set('Content-Security-Policy', policy);
    // Browsers too old for frame-ancestors honour this; with origins listed, frame-ancestors alone decides.
    if (options.frameAncestors.length === 0) ctx.set('X-Frame-Options', 'DENY');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
    await next();
  });

  // Matches /portal and /portal/; the page's asset references are relative, so it must be the latter.
  router.get('/portal', (ctx) => {
    if (ctx.path.endsWith('/')) return assets.serve(ctx, 'index.html');
    ctx.status = 308;
    ctx.redirect('/portal/');
  });
  router.get('/portal/:file', (ctx) => assets.serve(ctx, ctx.params.file!));

  return router;
}
