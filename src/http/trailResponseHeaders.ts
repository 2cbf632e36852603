import type { Middleware } from 'koa';
import type { RequestState } from './state.ts';

/**
 * Every answer of the public app is kept out of caches and read only as the type it declares: a trail page,
 * an export, a proof, a live feed, an error. An audit trail in a shared proxy's cache or a browser's back
 * button outlives the key that read it, and a JSON body sniffed as HTML would run what a producer wrote into
 * an event. Set before the route runs, so errors carry them too; what may be cached (the portal's hashed
 * assets) says so itself afterwards.
 */
export function trailResponseHeaders(): Middleware<RequestState> {
  return async (ctx, next) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('X-Content-Type-Options', 'nosniff');
    await next();
  };
}
