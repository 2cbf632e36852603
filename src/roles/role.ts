import type { IncomingMessage, ServerResponse } from 'node:http';
import type Router from '@koa/router';
import type { ReadinessCheck } from '../http/internalApp.ts';
import type { RequestState } from '../http/state.ts';
import type { SharedParts } from './sharedParts.ts';

/**
 * One role of the service (docs/operations.md "What runs"): it reads its part of the configuration, takes what it shares with
 * the process's other roles from SharedParts, registers how to release what it opens (parts.releasers, in
 * order of opening), and says what it serves. main.ts composes the roles a process runs; a new role is a
 * module exporting `role` and one line in main.ts's ROLE_MODULES.
 */
export interface Role {
  /**
   * Served behind a Kubernetes Service: a stopping process keeps serving while the endpoints drain
   * (SHUTDOWN_DRAIN_DELAY), since requests keep arriving until load balancers notice.
   */
  readonly behindService?: boolean;
  /** The process's writer hands the deliveries of what it writes to NATS itself (delivery/deliveryPublisher.ts). */
  readonly publishesDeliveries?: boolean;
  /**
   * Starts with Postgres away and answers 503 until it returns, which a client tells apart from a process
   * that is not there. A process running any other role waits for Postgres before starting its roles.
   */
  readonly startsWithoutPostgres?: boolean;
  /**
   * Serves the public API on PORT: the port listens while the process starts, answering 503 until the
   * role has started (never a connection refused or a 404 that a client would take for an answer).
   */
  readonly servesPublicPort?: boolean;
  start(parts: SharedParts): Promise<RoleParts>;
}

/** What a started role contributes to the process's ports. */
export interface RoleParts {
  /** Checks /readyz runs (non-critical ones show as degraded). */
  readonly readiness?: readonly ReadinessCheck[];
  /** Routes served on the internal port. */
  readonly internalRoutes?: readonly Router<RequestState>[];
  /** The public API's request handler, served on PORT; one role provides it. */
  readonly publicHandler?: PublicHandler;
}

export type PublicHandler = (request: IncomingMessage, response: ServerResponse) => void;
