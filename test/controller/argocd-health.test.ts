import { expect } from 'chai';
import { execFileSync } from 'node:child_process';

/**
 * The Argo CD health checks of docs/argocd/, run by Lua 5.1 (Argo CD's dialect) with lua-cjson decoding
 * the object, as Argo CD hands it over.
 */
function health(script: string, object: unknown): { status: string; message: string } {
  const runner = `
    local cjson = require "cjson"
    obj = cjson.decode(io.read("*a"))
    local hs = dofile("${script}")
    io.write(cjson.encode(hs))
  `;
  return JSON.parse(execFileSync('lua5.1', ['-e', runner], { input: JSON.stringify(object), encoding: 'utf8' }));
}

const ready = (status: string, reason: string, message = reason) => ({ type: 'Ready', status, reason, message, lastTransitionTime: '2026-11-22T10:00:00Z' });
const object = (generation: number, status?: object) => ({ metadata: { name: 'x', generation }, spec: {}, ...(status ? { status } : {}) });

describe('Argo CD health checks', function () {
  this.timeout(60_000);

  before(() => {
    execFileSync('bash', ['scripts/ensure-lua.sh'], { stdio: 'inherit' });
  });

  const apiKey = 'docs/argocd/apikey-health.lua';
  const webhook = 'docs/argocd/webhookendpoint-health.lua';

  it('ApiKey: Progressing without status or while the controller has not observed the current generation', () => {
    expect(health(apiKey, object(1)).status).to.equal('Progressing');
    expect(health(apiKey, object(2, { observedGeneration: 1, conditions: [ready('True', 'Active')] })).status).to.equal('Progressing');
  });

  it('ApiKey: Healthy when Active, Suspended when revoked on purpose, Degraded when refused', () => {
    expect(health(apiKey, object(3, { observedGeneration: 3, state: 'Active', conditions: [ready('True', 'Active', 'Key 1a2b3c4d is active.')] }))).to.deep.equal({
      status: 'Healthy',
      message: 'Key 1a2b3c4d is active.',
    });
    expect(health(apiKey, object(3, { observedGeneration: 3, conditions: [ready('False', 'Revoked')] })).status).to.equal('Suspended');
    expect(health(apiKey, object(3, { observedGeneration: 3, conditions: [ready('False', 'InvalidSpec', 'spec.scopes: bad')] }))).to.deep.equal({
      status: 'Degraded',
      message: 'spec.scopes: bad',
    });
    expect(health(apiKey, object(3, { observedGeneration: 3, conditions: [ready('False', 'SecretConflict')] })).status).to.equal('Degraded');
  });

  it('WebhookEndpoint: Healthy when active, Degraded when auto-disabled or refused, Progressing before the controller', () => {
    expect(health(webhook, object(1)).status).to.equal('Progressing');
    expect(health(webhook, object(1, { observedGeneration: 1, active: true, conditions: [ready('True', 'Active')] })).status).to.equal('Healthy');
    const disabled = health(webhook, object(1, { observedGeneration: 1, active: false, conditions: [ready('False', 'AutoDisabled', 'set annotation audittrail.dev/recreate')] }));
    expect(disabled).to.deep.equal({ status: 'Degraded', message: 'set annotation audittrail.dev/recreate' });
    expect(health(webhook, object(2, { observedGeneration: 1, conditions: [ready('True', 'Active')] })).status).to.equal('Progressing');
  });
});
