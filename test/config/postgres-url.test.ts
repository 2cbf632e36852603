import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { withPostgresTls } from '../../src/config/postgresTls.ts';
import { parsePostgresUrl, postgresDatabaseName, postgresUrlWithDatabase } from '../../src/config/postgresUrl.ts';

describe('Postgres URLs with several hosts (libpq form)', () => {
  it('takes every host, its port or 5432, and whether only a writable server will do', () => {
    const url = parsePostgresUrl('postgres://audit:s3cret@db-a:5433,db-b,[::1]:6000/trail?target_session_attrs=read-write&sslmode=require');
    expect(url.hosts).to.deep.equal([
      { host: 'db-a', port: 5433 },
      { host: 'db-b', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    expect(url.readWrite).to.equal(true);
    // What node-postgres gets: one host, the rest kept, target_session_attrs (which it ignores) taken out.
    expect(url.urlFor(url.hosts[2]!)).to.equal('postgres://audit:s3cret@[::1]:6000/trail?sslmode=require');
    expect(parsePostgresUrl('postgres://u@h/db?target_session_attrs=primary').readWrite).to.equal(true);
    expect(parsePostgresUrl('postgres://u@h/db').readWrite).to.equal(false);
  });

  it('refuses a target_session_attrs it does not implement, and a malformed host, naming DATABASE_URL', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u@a,b/db?target_session_attrs=standby' }))
      .to.throw(ConfigError, /^DATABASE_URL: target_session_attrs=standby is not supported/)
      .with.property('variable', 'DATABASE_URL');
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u@a:99999,b/db' })).to.throw(ConfigError, /^DATABASE_URL: has a port out of range/);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://u@a/db' })).to.throw(ConfigError, /^DATABASE_URL: must be a URL with scheme postgres/);
  });

  it('names another database on the same hosts (migrate --create-database goes through postgres)', () => {
    const url = 'postgres://audit:s3cret@db-a:5433,[::1]:6000/audit%20trail?target_session_attrs=read-write&sslmode=require';
    expect(postgresDatabaseName(url)).to.equal('audit trail');
    const maintenance = postgresUrlWithDatabase(url, 'postgres');
    expect(maintenance).to.equal('postgres://audit:s3cret@db-a:5433,[::1]:6000/postgres?target_session_attrs=read-write&sslmode=require');
    expect(parsePostgresUrl(maintenance).hosts).to.deep.equal(parsePostgresUrl(url).hosts);
    expect(postgresDatabaseName('postgres://u@h')).to.equal('');
  });

  it('keeps every host when the TLS files become parameters of the URL', () => {
    const url = withPostgresTls('postgres://u@db-a:5432,db-b:5432/trail?target_session_attrs=read-write', { caFile: '/etc/ca.crt' });
    expect(url).to.equal(
      'postgres://u@db-a:5432,db-b:5432/trail?target_session_attrs=read-write&sslrootcert=%2Fetc%2Fca.crt&sslmode=verify-full',
    );
  });
});
