import type { TlsFiles } from './config.ts';
import { editPostgresUrl } from './postgresUrl.ts';

// DATABASE_SSL_* variable → the libpq parameter of DATABASE_URL that means the same.
const PARAMETERS = [
  ['caFile', 'sslrootcert', 'DATABASE_SSL_CA'],
  ['certFile', 'sslcert', 'DATABASE_SSL_CERT'],
  ['keyFile', 'sslkey', 'DATABASE_SSL_KEY'],
] as const;

/**
 * DATABASE_URL with the certificate files of DATABASE_SSL_CA, _CERT and _KEY as its libpq parameters
 * (sslrootcert, sslcert, sslkey), which node-postgres reads for every client: the pool, the migrator and each
 * LISTEN connection. Kept in the URL rather than beside it, because node-postgres lets a connection string's
 * ssl settings replace any given separately. Without sslmode, verify-full: the server's certificate must be
 * signed by the CA and name the host.
 */
export function withPostgresTls(databaseUrl: string, files: TlsFiles | undefined): string {
  if (files === undefined) return databaseUrl;
  // Every host of a multi-host URL (a failover pair) keeps its place.
  return editPostgresUrl(databaseUrl, (parameters) => {
    if (parameters.get('sslmode') === 'disable') {
      throw new Error('says sslmode=disable, but DATABASE_SSL_CA or DATABASE_SSL_CERT asks for TLS');
    }
    for (const [member, parameter, variable] of PARAMETERS) {
      const file = files[member];
      if (file === undefined) continue;
      if (parameters.has(parameter)) throw new Error(`names ${parameter} and so does ${variable}; set one of them`);
      parameters.set(parameter, file);
    }
    if (!parameters.has('sslmode')) parameters.set('sslmode', 'verify-full');
  });
}
