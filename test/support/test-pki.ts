import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createAccount, createOperator, createUser, type KeyPair as NKeyPair } from '@nats-io/nkeys';

/**
 * Credentials for tests of TLS and authentication to the service's dependencies: a throw-away CA with
 * server and client certificates (openssl), and a NATS operator, account and user (JWTs signed with NKeys).
 * The private servers of private-services.ts take them.
 */

const run = promisify(execFile);

interface CertificateFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

/** A throw-away CA with a server certificate for localhost/127.0.0.1 and a client certificate. */
export interface TestPki {
  readonly caFile: string;
  readonly server: CertificateFiles;
  /** Signed by the CA for clientAuth, with the common name given to createTestPki. */
  readonly client: CertificateFiles;
  /** A second, unrelated CA: trusting it instead of the right one must fail. */
  readonly otherCaFile: string;
  remove(): void;
}

export async function createTestPki(clientName = 'audit-trail'): Promise<TestPki> {
  const dir = mkdtempSync(join(tmpdir(), 'audit-trail-pki-'));
  const file = (name: string) => join(dir, name);
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const selfSignedCa = async (name: string, subject: string) =>
    run('openssl', [
      'req',
      '-x509',
      ...newKey,
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.crt`),
      '-days',
      '2',
      '-subj',
      subject,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
  const signed = async (name: string, subject: string, extensions: string) => {
    writeFileSync(file(`${name}.ext`), extensions);
    await run('openssl', ['req', ...newKey, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`), '-subj', subject]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      file('ca.crt'),
      '-CAkey',
      file('ca.key'),
      '-CAcreateserial',
      '-out',
      file(`${name}.crt`),
      '-days',
      '2',
      '-extfile',
      file(`${name}.ext`),
    ]);
  };
  try {
    await selfSignedCa('ca', '/CN=audit-trail test CA');
    await selfSignedCa('other-ca', '/CN=some other CA');
    await signed('server', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
    await signed('client', `/CN=${clientName}`, 'extendedKeyUsage=clientAuth\n');
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    caFile: file('ca.crt'),
    otherCaFile: file('other-ca.crt'),
    server: { certFile: file('server.crt'), keyFile: file('server.key') },
    client: { certFile: file('client.crt'), keyFile: file('client.key') },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A NATS operator with one account and one user, as nsc would set them up: the server's side and the user's. */
export interface NatsOperatorSetup {
  /** Lines for the server's configuration (operator, system account, preloaded account JWTs). */
  readonly serverConfig: string;
  /** The text of a .creds file for the user. */
  readonly userCreds: string;
  /** The same user's JWT with another user's seed: a credentials file the server must refuse. */
  readonly forgedCreds: string;
}

/** JWTs signed with NKeys the way nsc signs them (header, claims and an ed25519 signature, base64url). */
export function natsOperatorSetup(): NatsOperatorSetup {
  const b64 = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');
  const jwt = (issuer: NKeyPair, subject: string, name: string, nats: object) => {
    const header = b64(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }));
    const claims = b64(
      JSON.stringify({
        jti: b64(randomBytes(16)),
        iat: Math.floor(Date.now() / 1000),
        iss: issuer.getPublicKey(),
        name,
        sub: subject,
        nats: { ...nats, version: 2 },
      }),
    );
    return `${header}.${claims}.${b64(issuer.sign(Buffer.from(`${header}.${claims}`)))}`;
  };
  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const user = createUser();
  const unlimited = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
  const userJwt = jwt(account, user.getPublicKey(), 'audit-trail', { type: 'user', pub: {}, sub: {}, subs: -1, data: -1, payload: -1 });
  const creds = (seed: Uint8Array) =>
    `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n${Buffer.from(seed).toString()}\n------END USER NKEY SEED------\n`;
  return {
    serverConfig: [
      `operator: ${jwt(operator, operator.getPublicKey(), 'test-operator', { type: 'operator', system_account: system.getPublicKey() })}`,
      `system_account: ${system.getPublicKey()}`,
      'resolver: MEMORY',
      'resolver_preload: {',
      `  ${system.getPublicKey()}: ${jwt(operator, system.getPublicKey(), 'SYS', { type: 'account', limits: unlimited })}`,
      `  ${account.getPublicKey()}: ${jwt(operator, account.getPublicKey(), 'audit', { type: 'account', limits: { ...unlimited, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } })}`,
      '}',
    ].join('\n'),
    userCreds: creds(user.getSeed()),
    forgedCreds: creds(createUser().getSeed()),
  };
}
