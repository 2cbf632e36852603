import pg from 'pg';

/**
 * The share of the server's connections this process's pools may hold together (docs/operations.md, "What a
 * pod holds"): half of the slots Postgres opens to ordinary roles, max_connections less the
 * superuser_reserved_connections (and, from PostgreSQL 16, reserved_connections). Half, so that another
 * process (a second pod, a migration, an operator's psql) still finds room when one is at its peak. Only a
 * server smaller than the pools are sized for makes it bite: with max_connections 100, half is 48, beyond
 * DATABASE_POOL_SIZE.
 */
const CONNECTION_SHARE = 0.5;

/** What one look at the server tells: the slots ordinary roles get, and the client connections open now. */
interface ServerSlots {
  readonly open: number;
  readonly used: number;
}

/**
 * Keeps a process's pools within CONNECTION_SHARE of the server's ordinary slots, and out of the reserved
 * ones. The service often connects as a superuser (locally, or a managed Postgres's admin role), and
 * Postgres lets a superuser have the reserved slots too: under load, the pools took them, leaving no room
 * for the operator who needs one to intervene. Every new connection (the pool's onConnect hook) asks the
 * server how many client connections are open; one that finds itself past the ordinary slots is closed at
 * once and fails as Postgres itself refuses a connection (53300, too_many_connections: a 503 for the
 * request, a retry for a background loop). The first answer also caps each pool's size: the pools share
 * the budget in proportion to their configured sizes, each keeping at least one connection.
 */
export class ConnectionBudget {
  private readonly pools: Array<{ pool: pg.Pool; configured: number }> = [];
  /** The server's ordinary slots, once asked. */
  private open: number | undefined;

  /**
   * A pool to keep within the budget, with the size it was configured with. Until the server has been asked,
   * it opens one connection at a time: a burst of requests at start would otherwise open the configured
   * number at once, before the first answer could cap it.
   */
  register(pool: pg.Pool, configured: number): void {
    this.pools.push({ pool, configured });
    if (this.open === undefined) pool.options.max = 1;
    else this.cap(this.open);
  }

  /** The pools' onConnect hook: throws (and the pool closes the connection) when it sits in a reserved slot. */
  async admit(client: pg.ClientBase): Promise<void> {
    const slots = await serverSlots(client);
    if (this.open === undefined) this.cap(slots.open);
    if (slots.used > slots.open) throw tooManyConnections(slots);
  }

  private cap(open: number): void {
    this.open = open;
    const budget = Math.max(this.pools.length, Math.floor(open * CONNECTION_SHARE));
    const configured = this.pools.reduce((sum, { configured: size }) => sum + size, 0);
    for (const { pool, configured: size } of this.pools) {
      pool.options.max = configured <= budget ? size : Math.max(1, Math.floor((size * budget) / configured));
    }
  }
}

/**
 * For a connection of its own (a LISTEN): fails, having closed it, when it sits in a reserved slot, as the
 * pools' connections do (ConnectionBudget.admit).
 */
export async function ensureOrdinarySlot(client: pg.Client): Promise<void> {
  const slots = await serverSlots(client);
  if (slots.used <= slots.open) return;
  await client.end().catch(() => undefined);
  throw tooManyConnections(slots);
}

async function serverSlots(client: pg.ClientBase): Promise<ServerSlots> {
  const { rows } = await client.query<{ open: number; used: number }>(
    `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
              - COALESCE(current_setting('reserved_connections', true)::int, 0) AS open,
            (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used`,
  );
  return rows[0]!;
}

/** The error Postgres raises when it refuses a connection, so that every caller classifies it the same way. */
function tooManyConnections(slots: ServerSlots): pg.DatabaseError {
  const error = new pg.DatabaseError(
    `connection refused by the service: ${slots.used} client connections open, ${slots.open} not reserved for superusers`,
    0,
    'error',
  );
  error.code = '53300';
  return error;
}
