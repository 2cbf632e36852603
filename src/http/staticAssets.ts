import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import type { Logger } from '../platform/logger.ts';
import { NotFoundError, ServiceUnavailableError } from '../platform/errors.ts';
import type { AppContext } from './state.ts';

/**
 * The files of a page that `make build` writes (the portal, the API reference): read once at start, each
 * served with an ETag; the page itself never cached (it names the current files), the other files immutable
 * (their names change with their content).
 */

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
};

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

export class StaticAssets {
  private readonly assets: Map<string, Asset> | undefined;
  private readonly what: string;

  /** `what` names the page in the messages: "The portal's assets were not built". */
  constructor(directory: string, what: string, log: Logger) {
    this.what = what;
    this.assets = loadAssets(directory, what, log);
  }

  /** Answers with the file (index.html is the page), 304 when the client's copy is current. */
  serve(ctx: AppContext, name: string): void {
    if (!this.assets) throw new ServiceUnavailableError(`The ${this.what} assets were not built: run \`make build\`.`);
    const asset = this.assets.get(name);
    if (!asset) throw new NotFoundError('No such file.');
    ctx.type = asset.type;
    ctx.set('ETag', asset.etag);
    ctx.set('Cache-Control', name === 'index.html' ? 'no-cache' : 'public, max-age=31536000, immutable');
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = asset.body;
  }
}

function loadAssets(directory: string, what: string, log: Logger): Map<string, Asset> | undefined {
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch {
    log.warn({ directory }, `the ${what} assets are missing (make build writes them); the page answers 503`);
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
