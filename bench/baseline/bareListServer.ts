/**
 * Baseline of the list benchmark: the plainest server a Node developer would write for the same query —
 * node:http and a pg Pool, the same SQL selecting the columns (of BARE_LIST_TABLE, `events` by default),
 * rows turned into objects and serialised with JSON.stringify. No authentication, no rate limiting, no validation: it only does what the list must.
 *   GET /events?tenant=T&limit=N[&action=A][&resource_type=R][&user_id=U][&resource_id=I][&cursor=C]   on PORT
 */
import { createServer } from 'node:http';
import pg from 'pg';

// Named so that the benchmark can meter its Postgres backends apart from other sessions' (the name costs nothing per query).
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.POOL_SIZE ?? 10),
  application_name: 'bare list server',
});
// The table it reads: the list benchmark's reference_events holds each field once as a column.
const table = process.env.BARE_LIST_TABLE ?? 'events';

const server = createServer(async (request, response) => {
  try {
    const url = new URL(request.url!, 'http://localhost');
    const tenant = url.searchParams.get('tenant')!;
    const limit = Number(url.searchParams.get('limit') ?? 100);
    const where = ['tenant_id = $1'];
    const values: unknown[] = [tenant];
    for (const column of ['action', 'resource_type', 'user_id', 'resource_id']) {
      const value = url.searchParams.get(column);
      if (value !== null) {
        values.push(value);
        where.push(`${column} = $${values.length}`);
      }
    }
    const cursor = url.searchParams.get('cursor');
    if (cursor) {
      const { t, id } = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { t: string; id: string };
      values.push(t, id);
      where.push(`(occurred_at, event_id) < ($${values.length - 1}::timestamptz, $${values.length}::uuid)`);
    }
    values.push(limit + 1);
    const { rows } = await pool.query(
      `SELECT event_id, occurred_at, action, user_id, user_role, resource_type, resource_id, fields_accessed, phi_involved,
              tenant_id, source_ip, user_agent, justification, success, details
         FROM ${table} WHERE ${where.join(' AND ')}
        ORDER BY occurred_at DESC, event_id DESC LIMIT $${values.length}`,
      values,
    );
    const hasMore = rows.length > limit;
    const page = rows.slice(0, limit);
    const events = page.map((row) => ({ ...row, timestamp: (row.occurred_at as Date).toISOString(), occurred_at: undefined }));
    const last = page.at(-1);
    const next =
      hasMore && last
        ? Buffer.from(JSON.stringify({ t: (last.occurred_at as Date).toISOString(), id: last.event_id })).toString('base64url')
        : null;
    const body = JSON.stringify({ events, page: { limit, returned: page.length, next_cursor: next, has_more: hasMore } });
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);
  } catch (error) {
    response.writeHead(500).end(String(error));
  }
});

server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => void pool.end().then(() => process.exit(0))));
