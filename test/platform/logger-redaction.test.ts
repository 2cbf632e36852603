import { expect } from 'chai';
import { createLogger } from '../../src/platform/logger.ts';

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

  it('leave out lines below the level asked for', () => {
    const { log, lines } = capturingLogger('warn');
    log.info('not written');
    log.warn('written');
    expect(lines.map((line) => line.msg)).to.deep.equal(['written']);
  });
});
