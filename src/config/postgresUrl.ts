/**
 * Postgres connection URLs as libpq reads them, with one thing node-postgres does not read: several hosts,
 * `postgres://user@db-a:5432,db-b:5432/audit_trail?target_session_attrs=read-write`, the form pg_auto_failover
 * (`pg_autoctl show uri`), Patroni and RDS documentation give for reaching whichever server is the primary.
 * node-postgres (8.x) takes the first host only and ignores target_session_attrs, and Node's URL parser refuses
 * the list outright; so the hosts are taken out here, and each connection is pointed at one of them by
 * postgresClient.ts.
 */

export interface PostgresHost {
  readonly host: string;
  readonly port: number;
}

export interface PostgresUrl {
  readonly hosts: readonly PostgresHost[];
  /** target_session_attrs=read-write (or primary): only a server that accepts writes will do. */
  readonly readWrite: boolean;
  /** The URL for one of the hosts, without target_session_attrs, as node-postgres takes it. */
  urlFor(host: PostgresHost): string;
}

const DEFAULT_PORT = 5432;
// Stands in for the host list while the rest of the URL goes through Node's parser.
const PLACEHOLDER = 'hosts.audit-trail.invalid';
const SHAPE = /^(postgres(?:ql)?:\/\/)((?:[^@/?#]*@)?)([^/?#]*)(.*)$/s;

/** Parses a postgres:// URL with one host or several; throws an Error saying what is wrong. */
export function parsePostgresUrl(text: string): PostgresUrl {
  const match = SHAPE.exec(text);
  if (!match) throw new Error('must be a URL with scheme postgres or postgresql');
  const [, scheme, credentials, hostList, rest] = match as unknown as [string, string, string, string, string];
  const hosts = hostList === '' ? [] : hostList.split(',').map(parseHost);
  const url = new URL(`${scheme}${credentials}${PLACEHOLDER}${rest}`);
  const attrs = url.searchParams.get('target_session_attrs') ?? 'any';
  if (!['any', 'read-write', 'primary'].includes(attrs)) {
    throw new Error(`target_session_attrs=${attrs} is not supported (any, read-write or primary)`);
  }
  url.searchParams.delete('target_session_attrs');
  const template = url.toString();
  return {
    // No host: node-postgres' default (PGHOST or localhost), as libpq would.
    hosts: hosts.length > 0 ? hosts : [{ host: '', port: DEFAULT_PORT }],
    readWrite: attrs !== 'any',
    urlFor(host) {
      const named = host.host === '' ? '' : `${host.host.includes(':') ? `[${host.host}]` : host.host}:${host.port}`;
      return template.replace(PLACEHOLDER, named);
    },
  };
}

/** The URL with `edit` applied to its query (TLS parameters, say), keeping every host. */
export function editPostgresUrl(text: string, edit: (parameters: URLSearchParams) => void): string {
  const { url, hostList } = templateUrl(text);
  edit(url.searchParams);
  return url.toString().replace(PLACEHOLDER, hostList);
}

/** The database a URL names (its path), decoded; '' when it names none. */
export function postgresDatabaseName(text: string): string {
  return decodeURIComponent(templateUrl(text).url.pathname.replace(/^\//, ''));
}

/** The same URL, every host and parameter kept, naming `database` instead (`postgres` to create another). */
export function postgresUrlWithDatabase(text: string, database: string): string {
  const { url, hostList } = templateUrl(text);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString().replace(PLACEHOLDER, hostList);
}

function templateUrl(text: string): { url: URL; hostList: string } {
  const match = SHAPE.exec(text);
  if (!match) throw new Error('must be a URL with scheme postgres or postgresql');
  const [, scheme, credentials, hostList, rest] = match as unknown as [string, string, string, string, string];
  return { url: new URL(`${scheme}${credentials}${PLACEHOLDER}${rest}`), hostList };
}

function parseHost(text: string): PostgresHost {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  const plain = /^([^:[\]]+)(?::(\d+))?$/.exec(text);
  const found = bracketed ?? plain;
  if (!found) throw new Error(`has a host that is not host or host:port: ${JSON.stringify(text)}`);
  const port = found[2] === undefined ? DEFAULT_PORT : Number(found[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`has a port out of range: ${JSON.stringify(text)}`);
  return { host: found[1]!, port };
}
