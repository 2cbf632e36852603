/**
 * Node's codes for a peer certificate it could not verify (OpenSSL's X509_V_ERR_* names, and Node's own check
 * of the host name). Each means the client's trust settings or the server's certificate must change: retrying
 * cannot help.
 */
const CERTIFICATE_ERROR_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** Whether the error, or any error in its cause chain, is a failed verification of the server's certificate. */
export function isCertificateError(error: unknown): boolean {
  for (let current = error; current instanceof Error; current = current.cause) {
    const code = (current as NodeJS.ErrnoException).code;
    if (code !== undefined && CERTIFICATE_ERROR_CODES.has(code)) return true;
  }
  return false;
}

/** What an operator reads when a dependency's certificate is not trusted: the fix, by variable name. */
export function untrustedCertificateMessage(dependency: string, caVariable: string, error: unknown): string {
  return `${dependency}: the server's TLS certificate is not trusted (${(error as Error).message}); set ${caVariable} to the CA certificate that signed it`;
}
