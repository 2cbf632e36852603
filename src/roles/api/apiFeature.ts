import type { PublicAppOptions } from '../../http/publicApp.ts';
import type { SharedParts } from '../sharedParts.ts';

/** One feature of the public API: its routes with their OpenAPI paths, mounted under the public prefix. */
export type Feature = PublicAppOptions['features'][number];

/**
 * A feature module of the api role: it opens what its routes need from the process's shared parts (and
 * registers how to release it) and contributes its routes. apiRole.ts lists the modules in mounting order.
 */
export type ApiFeature = (parts: SharedParts, pepper: string) => Promise<readonly Feature[]>;
