import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Logger } from '../platform/logger.ts';
import { NotFoundError, ServiceUnavailableError } from '../platform/errors.ts';
import type { AppContext, RequestState } from './state.ts';

/** `make build` writes the portal's assets here (scripts/build-portal.ts); beside src/ and dist/ alike. */
const portalAssetsDirectory = fileURLToPath(new URL('../../dist/portal/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

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
  const assets = loadAssets(options.directory ?? portalAssetsDirectory, options.log);
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

  const serve = (ctx: AppContext, name: string) => {
    if (!assets) throw new ServiceUnavailableError("The portal's assets were not built: run `make build`.");
    const asset = assets.get(name);
    if (!asset) throw new NotFoundError('No such portal file.');
    ctx.type = asset.type;
    ctx.set('ETag', asset.etag);
    ctx.set('Cache-Control', name === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable');
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = asset.body;
  };

  // Matches /portal and /portal/; the page's asset references are relative, so it must be the latter.
  router.get('/portal', (ctx) => {
    if (ctx.path.endsWith('/')) return serve(ctx, 'index.html');
    ctx.status = 308;
    ctx.redirect('/portal/');
  });
  router.get('/portal/:file', (ctx) => serve(ctx, ctx.params.file!));

  return router;
}

function loadAssets(directory: string, log: Logger): Map<string, Asset> | undefined {
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch {
    log.warn({ directory }, "the portal's assets are missing (make build writes them); /portal/ answers 503");
    return undefined;
  }
  const assets = new Map<string, Asset>();
  for (const name of names) {
    const type = CONTENT_TYPES[extname(name)];
    if (type === undefined) continue;
    const body = readFileSync(join(directory, name));
    assets.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  return assets;
}
