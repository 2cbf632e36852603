// Posts a few hundred realistic demo events for one tenant to the ingest endpoint of a running service.
// Usage: node scripts/seed-demo.ts <internal base url> <ingest token> <tenant> [count]
const [baseUrl, token, tenant, countText = '300'] = process.argv.slice(2);
if (!baseUrl || !token || !tenant) {
  console.error('usage: node scripts/seed-demo.ts <internal base url> <ingest token> <tenant> [count]');
  process.exit(2);
}

const actions = [
  { action: 'phi.read', resource_type: 'patient_record', phi: true, fields: ['diagnosis', 'medications'] },
  { action: 'phi.query', resource_type: 'claim', phi: true, fields: ['member_id', 'amount'] },
  { action: 'phi.export', resource_type: 'upload', phi: true, fields: ['lab_results'] },
  { action: 'admin.user.invite', resource_type: 'user', phi: false, fields: [] },
  { action: 'auth.login', resource_type: 'session', phi: false, fields: [] },
];
const roles = ['clinician', 'billing', 'admin', 'support'];
const now = Date.now();
const events = Array.from({ length: Number(countText) }, (_, index) => {
  const kind = actions[index % actions.length]!;
  const user = `user-${(index * 7) % 23}`;
  return {
    // Spread over the last seven days, newest last.
    timestamp: new Date(now - (Number(countText) - index) * 2_000_000).toISOString(),
    event_id: crypto.randomUUID(),
    tenant_id: tenant,
    action: kind.action,
    user_id: user,
    user_role: roles[index % roles.length]!,
    resource_type: kind.resource_type,
    resource_id: `${kind.resource_type}-${1000 + (index % 97)}`,
    phi_involved: kind.phi,
    fields_accessed: kind.phi ? kind.fields : undefined,
    justification: kind.phi ? 'treatment' : undefined,
    success: index % 17 !== 0,
    source_ip: `10.20.${index % 8}.${(index * 13) % 250}`,
    user_agent: 'demo-portal/2.3',
    details: { demo: true, sequence: index },
  };
});

const response = await fetch(`${baseUrl}/internal/v1/events`, {
  method: 'POST',
  headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
  body: JSON.stringify({ events }),
});
if (!response.ok) {
  console.error(`demo ingest failed: ${response.status} ${await response.text()}`);
  process.exit(1);
}
const result = (await response.json()) as { stored: number; duplicates: number };
console.error(`demo events: ${result.stored} stored for tenant ${tenant}`);
