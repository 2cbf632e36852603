import { expect } from 'chai';
import pg from 'pg';
import { createLogger } from '../../src/platform/logger.ts';
import { databaseUrl } from '../support/database.ts';

/** A logger writing its lines into an array, parsed. */
function capturingLogger(level = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger(level, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

// Keys, secrets and signatures never reach a log line, even when a call site passes them by accident.
describe('the service’s log lines', () => {
  it('are JSON naming the service, the level as a word and an ISO time', () => {
    const { log, lines } = capturingLogger();
    log.info({ tenant_id: 'acme' }, 'event stored');
    expect(lines[0]).to.include({ service: 'audit-trail', level: 'info', tenant_id: 'acme', msg: 'event stored' });
    expect(lines[0]!.time).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it('redact the Authorization header, cookies, keys, secrets and signatures', () => {
    const { log, lines } = capturingLogger();
    log.warn(
      {
        req: { headers: { authorization: 'Bearer ak_live_123', cookie: 'session=abc', accept: 'application/json' } },
        headers: { authorization: 'Bearer ak_live_456' },
        authorization: 'Bearer ak_live_789',
        apiKey: 'ak_live_000',
        key: 'ak_live_111',
        secret: 'whsec_222',
        signature: 't=1,v1=ff',
        endpoint: { secret: 'whsec_333', apiKey: 'ak_live_444', url: 'https://hooks.example' },
      },
      'request refused',
    );
    const text = JSON.stringify(lines[0]);
    for (const leaked of ['ak_live', 'whsec_', 'session=abc', 'v1=ff']) expect(text, leaked).to.not.include(leaked);
    expect(lines[0]).to.deep.include({
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]', accept: 'application/json' } },
      endpoint: { secret: '[redacted]', apiKey: '[redacted]', url: 'https://hooks.example' },
    });
  });

  it('carry an error as its type, message, stack and plain fields, never an object hung on it nor the data it quotes', () => {
    const { log, lines } = capturingLogger();
    // As pg's pool hands over the error of an idle connection that broke, and as Postgres refuses a row.
    const lost = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
      severity: 'FATAL',
      client: { secretKey: 1234567, connection: { parsedStatements: { q_1: 'SELECT patient FROM events' } } },
    });
    const refused = Object.assign(new Error('null value in column "action" violates not-null constraint'), {
      code: '23502',
      table: 'events',
      column: 'action',
      detail: 'Failing row contains (acme, 2026-12-05, jane.doe@example.org, HIV test).',
      where: 'COPY events, line 1',
      internalQuery: 'SELECT 1',
    });
    log.warn({ err: lost }, 'idle Postgres connection lost');
    log.error({ err: new Error('could not store the batch', { cause: refused }) }, 'ingest batch failed');
    log.error({ err: new AggregateError([refused], 'both failed') }, 'all failed');

    const text = JSON.stringify(lines);
    for (const leaked of ['secretKey', '1234567', 'parsedStatements', 'SELECT patient', 'jane.doe', 'HIV', 'COPY events', 'SELECT 1'])
      expect(text, leaked).to.not.include(leaked);
    expect(lines[0]!.err).to.deep.include({ type: 'Error', code: '57P01', severity: 'FATAL' });
    expect(lines[0]!.err).to.have.property('stack').that.includes('terminating connection');
    // The cause's message and stack ride with the error's own, as pino writes them.
    expect((lines[1]!.err as { message: string }).message).to.include('violates not-null constraint');
    expect((lines[2]!.err as { aggregateErrors: unknown[] }).aggregateErrors[0]).to.deep.include({
      code: '23502',
      table: 'events',
      column: 'action',
    });
  });

  it('carry a Postgres data exception up to where its message quotes the refused value, alone or as a cause', async () => {
    // Postgres' own errors, from a real server: each quotes a value of the trail in its message.
    const client = new pg.Client({ connectionString: databaseUrl('postgres') });
    await client.connect();
    const refusedBy = (sql: string, values: unknown[]) =>
      client.query(sql, values).then(
        () => expect.fail(sql),
        (error: unknown) => error,
      );
    let refusals: unknown[];
    try {
      refusals = [
        await refusedBy('SELECT $1::uuid', ['jane.doe@example.org']),
        await refusedBy('SELECT $1::int', ['31415926535 HIV']),
        await refusedBy('SELECT $1::timestamptz', ['Jane Doe: HIV positive']),
        await refusedBy(`SELECT convert_from($1::bytea, 'UTF8')`, [Buffer.from([0x4a, 0xff, 0x44])]),
      ];
    } finally {
      await client.end();
    }
    const { log, lines } = capturingLogger();
    for (const refusal of refusals) log.error({ err: refusal }, 'refused');
    log.error({ err: new Error('could not store the batch', { cause: refusals[0] }) }, 'wrapped');
    log.error({ err: new AggregateError(refusals, 'all refused') }, 'aggregated');

    const text = JSON.stringify(lines);
    for (const leaked of ['jane', '31415926535', 'HIV', '0xff']) expect(text, leaked).to.not.include(leaked);
    expect(lines.map((line) => (line.err as { message: string }).message)).to.deep.equal([
      'invalid input syntax for type uuid [the value withheld]',
      'value [the value withheld]',
      'invalid input syntax for type timestamp with time zone [the value withheld]',
      'invalid byte sequence for encoding [the value withheld]',
      'could not store the batch: invalid input syntax for type uuid [the value withheld]',
      'all refused',
    ]);
    // The code says what the message no longer does; the stack still says where.
    expect(lines.slice(0, 4).map((line) => (line.err as { code: string }).code)).to.deep.equal(['22P02', '22003', '22007', '22021']);
    expect((lines[0]!.err as { stack: string }).stack).to.match(
      /^error: invalid input syntax for type uuid \[the value withheld\]\n\s+at /,
    );
  });

  it('leave a Postgres error of another class, which names no value, as it is', () => {
    const { log, lines } = capturingLogger();
    const conflict = Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001', severity: 'ERROR' });
    log.error({ err: conflict }, 'conflict');
    expect((lines[0]!.err as { message: string }).message).to.equal('could not serialize access due to concurrent update');
  });

  it('leave a value logged as err that is no error as it is', () => {
    const { log, lines } = capturingLogger();
    log.warn({ err: 'a plain text' }, 'odd');
    expect(lines[0]!.err).to.equal('a plain text');
  });

  it('leave out lines below the level asked for', () => {
    const { log, lines } = capturingLogger('warn');
    log.info('not written');
    log.warn('written');
    expect(lines.map((line) => line.msg)).to.deep.equal(['written']);
  });
});
