import { expect } from 'chai';
import {
  normaliseEventFilter,
  normaliseWebhookUrl,
  webhookRegistrationSchema,
  webhookUrlProblem,
} from '../../src/webhooks/webhookRules.ts';

const HTTPS_ONLY = { allowHttp: false };

/** What a webhook target may be (docs/webhooks.md "Registering an endpoint"), before any address is looked up. */
describe('webhook target URLs', () => {
  it('accepts an https URL with a path, query and port', () => {
    expect(webhookUrlProblem('https://hooks.example.com:8443/audit?team=sec', HTTPS_ONLY)).to.equal(undefined);
  });

  it('refuses plain http unless WEBHOOK_ALLOW_HTTP allows it, and every other scheme', () => {
    expect(webhookUrlProblem('http://hooks.example.com/', HTTPS_ONLY)).to.equal('must use https');
    expect(webhookUrlProblem('http://hooks.example.com/', { allowHttp: true })).to.equal(undefined);
    expect(webhookUrlProblem('ftp://hooks.example.com/', { allowHttp: true })).to.equal('must use https or http');
  });

  it('refuses what would leak or mislead: credentials, a fragment, port 0, a relative URL', () => {
    expect(webhookUrlProblem('https://user:pw@hooks.example.com/', HTTPS_ONLY)).to.equal('must not contain credentials');
    expect(webhookUrlProblem('https://hooks.example.com/#x', HTTPS_ONLY)).to.equal('must not contain a fragment');
    expect(webhookUrlProblem('https://hooks.example.com:0/', HTTPS_ONLY)).to.equal('must not use port 0');
    expect(webhookUrlProblem('/audit', HTTPS_ONLY)).to.equal('must be an absolute URL');
  });

  it('refuses URLs over 2048 characters, as written or once normalised', () => {
    expect(webhookUrlProblem(`https://h.example.com/${'a'.repeat(2048)}`, HTTPS_ONLY)).to.equal('must be at most 2048 characters');
    const growing = `https://h.example.com/${'é'.repeat(700)}`;
    expect(growing.length).to.be.below(2048);
    expect(webhookUrlProblem(growing, HTTPS_ONLY)).to.equal('must be at most 2048 characters once normalised');
  });

  it('stores one spelling of each target: host lower case, default port and dot segments gone, an address canonical', () => {
    expect(normaliseWebhookUrl('HTTPS://Hooks.Example.COM:443/a/../b')).to.equal('https://hooks.example.com/b');
    expect(normaliseWebhookUrl('https://0x7f.1/')).to.equal('https://127.0.0.1/');
    expect(normaliseWebhookUrl('not a url')).to.equal('not a url');
  });

  it('keeps each event filter entry once, in the order first given', () => {
    expect(normaliseEventFilter(['phi.', 'admin.webhook.create', 'phi.'])).to.deep.equal(['phi.', 'admin.webhook.create']);
  });

  it('refuses unknown fields of a registration, so that a misspelt filter never means every event', () => {
    const schema = webhookRegistrationSchema(HTTPS_ONLY);
    expect(schema.safeParse({ url: 'https://hooks.example.com/', event_filters: ['phi.'] }).success).to.equal(false);
    const parsed = schema.parse({ url: 'https://hooks.example.com/' });
    expect(parsed).to.deep.include({ event_filter: [], description: '', kind: 'events' });
  });

  it('refuses a retry schedule over three days in all, or a delay over a day', () => {
    const schema = webhookRegistrationSchema(HTTPS_ONLY);
    const url = 'https://hooks.example.com/';
    expect(schema.safeParse({ url, retry_schedule_s: [86_400, 86_400, 86_400] }).success).to.equal(true);
    expect(schema.safeParse({ url, retry_schedule_s: [86_400, 86_400, 86_400, 1] }).success).to.equal(false);
    expect(schema.safeParse({ url, retry_schedule_s: [86_401] }).success).to.equal(false);
  });
});
