import { expect } from 'chai';
import { execFileSync } from 'node:child_process';

/**
 * The Argo CD health check of docs/argocd/health.lua, run by Lua 5.1 (Argo CD's dialect) with lua-cjson
 * decoding the object, as Argo CD hands it over.
 */
function health(object: unknown): { status: string; message: string } {
  const runner = `
    local cjson = require "cjson"
    obj = cjson.decode(io.read("*a"))
    local hs = dofile("docs/argocd/health.lua")
    io.write(cjson.encode(hs))
  `;
  return JSON.parse(execFileSync('lua5.1', ['-e', runner], { input: JSON.stringify(object), encoding: 'utf8' }));
}

const condition = (type: string, status: string, reason: string, message = reason) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: '2026-11-22T10:00:00Z',
});
const ready = (status: string, reason: string, message = reason) => condition('Ready', status, reason, message);
const stalled = (reason: string, message = reason) => [ready('False', reason, message), condition('Stalled', 'True', reason, message)];
const object = (generation: number, status?: object) => ({ metadata: { name: 'x', generation }, spec: {}, ...(status ? { status } : {}) });

describe('Argo CD health check', function () {
  this.timeout(60_000);

  before(() => {
    execFileSync('bash', ['scripts/ensure-lua.sh'], { stdio: 'inherit' });
  });

  it('Progressing without status, while the controller has not observed the current generation, and while it retries', () => {
    expect(health(object(1)).status).to.equal('Progressing');
    expect(health(object(2, { observedGeneration: 1, conditions: [ready('True', 'Active')] })).status).to.equal('Progressing');
    const retrying = health(
      object(1, {
        conditions: [
          ready('Unknown', 'RetryingAfterError'),
          condition('Reconciling', 'True', 'RetryingAfterError', 'Reconcile failed; retrying'),
        ],
      }),
    );
    expect(retrying).to.deep.equal({ status: 'Progressing', message: 'Reconcile failed; retrying' });
  });

  it('Healthy when Ready (a key active, an endpoint receiving deliveries)', () => {
    expect(
      health(object(3, { observedGeneration: 3, state: 'Active', conditions: [ready('True', 'Active', 'Key 1a2b3c4d is active.')] })),
    ).to.deep.equal({
      status: 'Healthy',
      message: 'Key 1a2b3c4d is active.',
    });
  });

  it('Suspended for a state chosen on purpose: a key revoked, an endpoint disabled (also as older controllers wrote it)', () => {
    expect(health(object(3, { observedGeneration: 3, conditions: [ready('True', 'Revoked')] })).status).to.equal('Suspended');
    expect(health(object(3, { observedGeneration: 3, conditions: [ready('True', 'Disabled')] })).status).to.equal('Suspended');
    expect(health(object(3, { observedGeneration: 3, conditions: [ready('False', 'Revoked')] })).status).to.equal('Suspended');
  });

  it('Degraded when Stalled, with the message that says what to do', () => {
    for (const reason of ['InvalidSpec', 'SecretConflict', 'SecretMissing', 'AutoDisabled', 'RevokedOutsideKubernetes']) {
      expect(health(object(1, { observedGeneration: 1, conditions: stalled(reason, `${reason}: do this`) })), reason).to.deep.equal({
        status: 'Degraded',
        message: `${reason}: do this`,
      });
    }
    expect(
      health(object(1, { observedGeneration: 1, conditions: [ready('False', 'AutoDisabled', 'set annotation audittrail.dev/recreate')] }))
        .status,
    ).to.equal('Degraded');
  });
});
