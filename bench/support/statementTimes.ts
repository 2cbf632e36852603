/**
 * Where a phase's Postgres time went, statement by statement, when the server loads pg_stat_statements (a
 * private server started for a profile: the machine's own does not, and restarting it is not ours to do).
 * BENCH_STATEMENTS=1 asks for it; without the extension in the benchmark's database it says so and reports
 * nothing, so a run on the machine's server is not disturbed.
 */
import pg from 'pg';

export interface StatementTime {
  readonly calls: number;
  readonly exec_ms: number;
  readonly plan_ms: number;
  readonly rows: number;
  readonly wal_bytes: number;
  readonly shared_blks_hit: number;
  /** The statement's first 100 characters, whitespace folded. */
  readonly statement: string;
}

/** A phase's statement times: `start()` before it, `stop()` after; both no-ops unless enabled and available. */
export interface StatementPhase {
  start(): Promise<void>;
  stop(top?: number): Promise<StatementTime[] | undefined>;
}

export function statementPhase(databaseUrl: string, enabled = process.env.BENCH_STATEMENTS === '1'): StatementPhase {
  let available: boolean | undefined;
  const withClient = async <T>(run: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench statement times' });
    await client.connect();
    try {
      return await run(client);
    } finally {
      await client.end();
    }
  };
  // Whether the benchmark's database can report them: the extension created there, and the server loading it.
  const ready = async (): Promise<boolean> => {
    if (!enabled) return false;
    available ??= await withClient(async (client) => {
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      await client.query('SELECT 1 FROM pg_stat_statements LIMIT 1');
      return true;
    }).catch((error: Error) => {
      process.stderr.write(`statement times unavailable: ${error.message}\n`);
      return false;
    });
    return available;
  };
  return {
    async start() {
      if (await ready()) await withClient((client) => client.query('SELECT pg_stat_statements_reset()'));
    },
    async stop(top = 12) {
      if (!(await ready())) return undefined;
      return withClient(async (client) => {
        const { rows } = await client.query<StatementTime>(
          `SELECT calls::int, round(total_exec_time::numeric, 1)::float8 AS exec_ms, round(total_plan_time::numeric, 1)::float8 AS plan_ms,
                  rows::int, wal_bytes::int8::float8 AS wal_bytes, shared_blks_hit::int8::float8 AS shared_blks_hit,
                  left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS statement
           FROM pg_stat_statements
           WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
             AND query NOT LIKE '%pg_stat_statements%'
           ORDER BY total_exec_time + total_plan_time DESC
           LIMIT $1`,
          [top],
        );
        return rows;
      });
    },
  };
}
