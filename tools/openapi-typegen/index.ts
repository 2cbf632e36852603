/**
 * TypeScript types for an OpenAPI document, as a client project would generate them with openapi-typescript.
 *
 * openapi-typescript builds its output with the TypeScript 5 compiler API (a peer dependency). The project
 * compiles with TypeScript 7, whose package has no such API, and npm cannot hold both versions at the root
 * (one `tsc`, one peer). This package exists so that npm installs openapi-typescript with its own
 * TypeScript 5 under tools/openapi-typegen/node_modules, out of the project's way.
 */
import openapiTS, { astToString } from 'openapi-typescript';

export async function generateClientTypes(document: object): Promise<string> {
  return astToString(await openapiTS(structuredClone(document) as Parameters<typeof openapiTS>[0]));
}
