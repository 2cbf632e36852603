import { expect } from 'chai';
import { isCertificateError, untrustedCertificateMessage } from '../../src/platform/tlsFailure.ts';

const withCode = (message: string, code: string, cause?: unknown) => Object.assign(new Error(message, { cause }), { code });

// A certificate the client does not trust is an operator's fix (a CA variable), not a reason to retry.
describe('untrusted certificates of dependencies', () => {
  it('recognises Node’s codes for a certificate it could not verify, also deep in the cause chain', () => {
    expect(isCertificateError(withCode('self-signed certificate in certificate chain', 'SELF_SIGNED_CERT_IN_CHAIN'))).to.equal(true);
    expect(isCertificateError(withCode('hostname mismatch', 'ERR_TLS_CERT_ALTNAME_INVALID'))).to.equal(true);
    const wrapped = new Error('connection failed', { cause: new Error('handshake', { cause: withCode('expired', 'CERT_HAS_EXPIRED') }) });
    expect(isCertificateError(wrapped)).to.equal(true);
  });

  it('does not take other failures for one: a refused connection, a timeout, what is not an Error', () => {
    expect(isCertificateError(withCode('connect ECONNREFUSED', 'ECONNREFUSED'))).to.equal(false);
    expect(isCertificateError(new Error('timeout'))).to.equal(false);
    expect(isCertificateError({ code: 'CERT_HAS_EXPIRED' })).to.equal(false);
    expect(isCertificateError(undefined)).to.equal(false);
  });

  it('tells the operator which variable fixes it', () => {
    expect(untrustedCertificateMessage('Postgres', 'DATABASE_SSL_CA', new Error('unable to get local issuer certificate'))).to.equal(
      "Postgres: the server's TLS certificate is not trusted (unable to get local issuer certificate); set DATABASE_SSL_CA to the CA certificate that signed it",
    );
  });
});
