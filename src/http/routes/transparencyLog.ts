import Router from '@koa/router';
import { z } from 'zod';
import { NotFoundError } from '../../platform/errors.ts';
import { parseTlogTilePath } from '../../integrity/tlogTiles.ts';
import type { TransparencyLog } from '../../integrity/transparencyLog.ts';
import { requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { parseQuery, textBody } from '../requestInput.ts';
import { PUBLIC_PREFIX } from '../publicApp.ts';
import { principalOf, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';

/**
 * The tenant's log in C2SP formats (docs/integrity.md "Checkpoints and tiles"): tlog-checkpoint, its vkey,
 * tlog-tiles, and cosignatures posted by the tenant's witnesses. The paths hold no tenant (the key says
 * which log), so every response is `private`: a shared cache must never hand one tenant's tiles to another.
 */

/**
 * Tile reads, paid for in blocks of the key's read budget (auth/prepaidReads.ts): a monitor makes thousands,
 * each small and cheap, and their answers never change.
 */
export const TILE_PATHS = new RegExp(`^${PUBLIC_PREFIX}/audit/integrity/tile/`);

const FULL_TILE_CACHE = 'private, max-age=31536000, immutable';
// A partial tile is replaced by a wider one as the tree grows; a checkpoint by the next one.
const PARTIAL_TILE_CACHE = 'private, max-age=10';
const CHECKPOINT_CACHE = 'private, max-age=2';
// An entry may say later that its event was redacted or expired: bundles are long-lived, not immutable.
const FULL_BUNDLE_CACHE = 'private, max-age=3600';

export function transparencyLogRoutes(log: TransparencyLog): Router<RequestState> {
  const router = new Router<RequestState>();

  router.get('/audit/integrity/checkpoint', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = await log.checkpoint(principalOf(ctx).tenantId);
    ctx.type = 'text/plain; charset=utf-8';
    ctx.set('Cache-Control', CHECKPOINT_CACHE);
  });

  router.get('/audit/integrity/verifier-key', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    ctx.body = await log.verifierKey(principalOf(ctx).tenantId);
    ctx.type = 'text/plain; charset=utf-8';
  });

  router.get('/audit/integrity/tile/*tile_path', requireScope('audit:read'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const tile = parseTlogTilePath(String(ctx.params.tile_path));
    if (!tile) throw new NotFoundError('No such tile: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>], as C2SP tlog-tiles names them.');
    const tenantId = principalOf(ctx).tenantId;
    const response =
      tile.level === 'entries' ? await log.entryBundle(tenantId, tile) : await log.hashTile(tenantId, { ...tile, level: tile.level });
    ctx.body = response.body;
    ctx.type = 'application/octet-stream';
    ctx.set('Cache-Control', !response.full ? PARTIAL_TILE_CACHE : tile.level === 'entries' ? FULL_BUNDLE_CACHE : FULL_TILE_CACHE);
  });

  router.post('/audit/integrity/cosignatures', requireScope('audit:read'), textBody('64kb'), async (ctx) => {
    const witnessKey = parseQuery(cosignatureQuerySchema, ctx.query).witness_key;
    const kept = await log.acceptCosignatures(principalOf(ctx).tenantId, ctx.request.body as string, witnessKey);
    ctx.status = 201;
    ctx.body = { cosignatures: kept };
  });

  return router;
}

const cosignatureQuerySchema = z.strictObject({
  witness_key: z.string().min(1).max(200).meta({ description: "The witness's verifier key (vkey of type 0x04, tlog-cosignature/v1)." }),
});

const text = (description: string) => ({ description, content: { 'text/plain; charset=utf-8': { schema: { type: 'string' } } } });
const octets = (description: string) => ({
  description,
  content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
});
const notFound = (description: string) => ({ '404': authenticatedResponse({ description, content: json(ref('Error')) }) });

const get = (operationId: string, summary: string, ok: object, extra: object, parameters: object[] = []) => ({
  get: {
    operationId,
    summary,
    security: [{ apiKey: [] }],
    parameters,
    responses: { '200': authenticatedResponse(ok as { description: string }), ...extra, ...standardErrorResponses('audit:read') },
  },
});

export const transparencyLogOpenApi: OpenApiContribution = {
  paths: {
    '/audit/integrity/checkpoint': get(
      'getCheckpoint',
      "The latest checkpoint of the tenant's log (C2SP tlog-checkpoint, a signed note), with the cosignatures its witnesses posted.",
      text('The signed note: origin, tree size, base64 root hash, a blank line, the signature lines.'),
      notFound('Nothing of this tenant has been sealed yet.'),
    ),
    '/audit/integrity/verifier-key': get(
      'getVerifierKey',
      "The verifier key (C2SP signed-note vkey) of the tenant's log: its origin as the key name and the sealer's current key.",
      text('<origin>+<key id>+<base64 key>, and a newline.'),
      notFound('Nothing of this tenant has been sealed yet.'),
    ),
    '/audit/integrity/tile/{tile_path}': get(
      'getTile',
      "A tile of the tenant's tree (C2SP tlog-tiles): <L>/<N>[.p/<W>] for hashes, entries/<N>[.p/<W>] for an entry bundle.",
      octets('The tile. Full hash tiles are immutable; partial ones and checkpoints are short-lived.'),
      notFound('No such tile in the tree (yet).'),
      [
        {
          name: 'tile_path',
          in: 'path',
          required: true,
          schema: { type: 'string' },
          description: 'e.g. 0/x001/234, 1/000.p/17, entries/005',
        },
      ],
    ),
    '/audit/integrity/cosignatures': {
      post: {
        operationId: 'postCosignatures',
        summary: "A witness's cosignatures of one of the tenant's checkpoints, in the shape of a C2SP tlog-witness add-checkpoint request.",
        security: [{ apiKey: [] }],
        parameters: [{ name: 'witness_key', in: 'query', required: true, schema: { type: 'string' } }],
        requestBody: { required: true, content: { 'text/plain': { schema: { type: 'string' } } } },
        responses: {
          '201': authenticatedResponse({
            description: 'The cosignatures kept.',
            content: json({ type: 'object', properties: { cosignatures: { type: 'integer' } } }),
          }),
          ...notFound("The checkpoint is not of this tenant's log."),
          ...standardErrorResponses('audit:read'),
        },
      },
    },
  },
};
