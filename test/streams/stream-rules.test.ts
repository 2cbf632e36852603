import { expect } from 'chai';
import { normaliseFilter, startAtMs, streamCreationSchema, streamOcsfVersion } from '../../src/streams/streamRules.ts';
import { DEFAULT_OCSF_VERSION } from '../../src/streams/ocsf.ts';

const schema = streamCreationSchema({ allowHttp: false });
const hec = { type: 'splunk_hec', url: 'https://splunk.example.com:8088', token: 'hec-token' };

/** The problems of a POST /audit/streams body, as "path: message". */
function problems(body: unknown): string[] {
  const parsed = schema.safeParse(body);
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}

/** What a log stream may be (docs/streams.md), checked before anything is stored or sent. */
describe('log stream rules', () => {
  it('takes a destination with its defaults: native format, tree heads on, from now', () => {
    const parsed = schema.parse({ destination: hec });
    expect(parsed).to.deep.include({ format: 'native', tree_heads: true });
    expect(startAtMs(parsed.start_at)).to.equal(undefined);
  });

  it('refuses unknown members, so that a misspelt filter never means every event', () => {
    expect(problems({ destination: hec, filters: { phi_involved: true } })).to.have.length(1);
    expect(problems({ destination: hec, filter: { phi: true } })).to.have.length(1);
  });

  it('refuses a token that could not travel in an HTTP header, without echoing it', () => {
    const found = problems({ destination: { ...hec, token: 'two words' } });
    expect(found).to.deep.equal(['destination.token: must be printable ASCII without spaces: it is sent in an HTTP header']);
  });

  it('refuses destination URLs with a query, credentials, or without https', () => {
    expect(problems({ destination: { ...hec, url: 'https://splunk.example.com/?x=1' } })).to.deep.equal([
      'destination.url: must not contain a query string',
    ]);
    expect(problems({ destination: { ...hec, url: 'http://splunk.example.com/' } })).to.deep.equal(['destination.url: must use https']);
  });

  it('takes an AMQP broker over amqps with its credentials apart, never in the URL, and one vhost at most', () => {
    const amqp = { type: 'amqp', url: 'amqps://broker.example.com/audit', username: 'u', password: 'p', exchange: 'audit' };
    expect(problems({ destination: amqp })).to.deep.equal([]);
    expect(problems({ destination: { ...amqp, url: 'amqps://u:p@broker.example.com/' } })[0]).to.include('must not contain credentials');
    expect(problems({ destination: { ...amqp, url: 'amqp://broker.example.com/' } })[0]).to.include('must use amqps');
    expect(problems({ destination: { ...amqp, url: 'amqps://broker.example.com/a/b' } })[0]).to.include('at most one vhost');
  });

  it('takes S3 buckets and prefixes by S3’s rules', () => {
    const s3 = {
      type: 's3',
      bucket: 'audit-archive',
      prefix: 'trail/prod',
      region: 'eu-west-1',
      access_key_id: 'AKIA',
      secret_access_key: 's',
    };
    expect(problems({ destination: s3 })).to.deep.equal([]);
    expect(problems({ destination: { ...s3, bucket: 'Audit_Archive' } })).to.have.length(1);
    expect(problems({ destination: { ...s3, prefix: '/trail' } })).to.have.length(1);
    expect(problems({ destination: { ...s3, prefix: 'trail/../other' } })).to.have.length(1);
  });

  it('gives an OCSF version to ocsf streams only, the default unless one is asked for', () => {
    expect(problems({ destination: hec, format: 'native', ocsf_version: DEFAULT_OCSF_VERSION })).to.deep.equal([
      'ocsf_version: only an ocsf stream has an OCSF version',
    ]);
    expect(streamOcsfVersion('ocsf', undefined)).to.equal(DEFAULT_OCSF_VERSION);
    expect(streamOcsfVersion('ocsf', '1.3.0')).to.equal('1.3.0');
    expect(streamOcsfVersion('native', '1.3.0')).to.equal(null);
  });

  it('starts a backfill from a past instant, and refuses one in the future', () => {
    expect(startAtMs('2020-01-01T00:00:00Z')).to.equal(Date.UTC(2020, 0, 1));
    expect(problems({ destination: hec, start_at: '2020-01-01T00:00:00Z' })).to.deep.equal([]);
    expect(problems({ destination: hec, start_at: '2999-01-01T00:00:00Z' })).to.deep.equal([
      'start_at: must not be in the future: use "now"',
    ]);
    expect(problems({ destination: hec, start_at: 'yesterday' })).to.deep.equal(['start_at: must be "now" or an RFC 3339 instant']);
  });

  it('stores a filter with each prefix once and without absent members', () => {
    expect(normaliseFilter({ action_prefixes: ['phi.', 'admin.', 'phi.'], phi_involved: false })).to.deep.equal({
      action_prefixes: ['phi.', 'admin.'],
      phi_involved: false,
    });
    expect(normaliseFilter({ action_prefixes: [] })).to.deep.equal({});
    expect(normaliseFilter(undefined)).to.deep.equal({});
  });
});
