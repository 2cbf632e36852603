import { expect } from 'chai';
import {
  DNS_LABEL_MAX_LENGTH,
  DNS_LABEL_PATTERN,
  DNS_SUBDOMAIN_MAX_LENGTH,
  DNS_SUBDOMAIN_PATTERN,
} from '../../src/platform/kubernetesNames.ts';

// What k8s.io/apimachinery's IsDNS1123Label and IsDNS1123Subdomain accept: a name the API server would refuse is
// refused before it is sent, with our own message, rather than as a 422 from the server mid-reconcile.
describe('Kubernetes object names (DNS-1123)', () => {
  it('accepts labels of lowercase letters, digits and inner hyphens', () => {
    for (const name of ['a', '0', 'audit-trail', 'key-1', 'a1b2', '9-lives']) expect(DNS_LABEL_PATTERN.test(name), name).to.equal(true);
  });

  it('refuses labels with capitals, dots, underscores, or a hyphen at either end', () => {
    for (const name of ['', 'Audit', 'a.b', 'a_b', '-a', 'a-', 'a b', 'é']) expect(DNS_LABEL_PATTERN.test(name), name).to.equal(false);
  });

  it('accepts subdomains of dotted labels, each well formed', () => {
    for (const name of ['audit-trail', 'audittrail.dev', 'apikeys.audittrail.dev', 'a.b-c.d0'])
      expect(DNS_SUBDOMAIN_PATTERN.test(name), name).to.equal(true);
    for (const name of ['.a', 'a.', 'a..b', 'a.-b', 'a.B', 'a/b']) expect(DNS_SUBDOMAIN_PATTERN.test(name), name).to.equal(false);
  });

  it('has the lengths of the Kubernetes limits: 63 for a label, 253 for a subdomain', () => {
    expect([DNS_LABEL_MAX_LENGTH, DNS_SUBDOMAIN_MAX_LENGTH]).to.deep.equal([63, 253]);
  });
});
