import { adminEvent, type Actor } from '../events/adminEvent.ts';
import { TENANT_ID_PATTERN } from '../events/eventFields.ts';
import type { NewEvent } from '../events/eventStore.ts';
import type { Queryable } from '../db/database.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { parseCidr } from '../platform/cidr.ts';
import { ConflictError, NotFoundError, ValidationError, type FieldProblem } from '../platform/errors.ts';
import { generateApiKey, hashKeySecret, type KeyEnvironment } from './apiKeyFormat.ts';
import {
  findApiKey,
  findManagedApiKey,
  insertApiKey,
  listApiKeys,
  revokeApiKey,
  updateApiKeyGrants,
  type ApiKeyRecord,
} from './apiKeyStore.ts';
import { SCOPES, isScope } from './scopes.ts';

export type { Actor };

export interface KeyGrants {
  readonly tenantId: string;
  readonly scopes: readonly string[];
  readonly allowedCidrs?: readonly string[];
  readonly description?: string;
}

export interface MintedKey {
  /** The full key: shown once to whoever minted it, never stored or logged. */
  readonly key: string;
  readonly record: ApiKeyRecord;
}

const DESCRIPTION_MAX_LENGTH = 500;
const MINT_ATTEMPTS = 5;

/** Minting, revoking and listing keys (operator CLI and the Kubernetes controller). */
export interface ApiKeyServiceOptions {
  /** Reads of keys. */
  readonly db: Queryable;
  /** Changes, each with its admin.key.* event in one transaction. */
  readonly writer: EventWriter;
  readonly pepper: string;
  readonly environment: KeyEnvironment;
}

export class ApiKeyService {
  private readonly db: Queryable;
  private readonly writer: EventWriter;
  private readonly pepper: string;
  private readonly environment: KeyEnvironment;

  constructor(options: ApiKeyServiceOptions) {
    this.db = options.db;
    this.writer = options.writer;
    this.pepper = options.pepper;
    this.environment = options.environment;
  }

  async mint(grants: KeyGrants, actor: Actor, managedBy: string | null = null): Promise<MintedKey> {
    const valid = validateGrants(grants);
    for (let attempt = 0; attempt < MINT_ATTEMPTS; attempt += 1) {
      const generated = generateApiKey(this.environment);
      const record = await this.writer.recordWith('internal', async (client) => {
        const inserted = await insertApiKey(client, {
          lookupId: generated.lookupId,
          environment: this.environment,
          secretHash: hashKeySecret(this.pepper, generated.secret),
          tenantId: valid.tenantId,
          scopes: valid.scopes,
          allowedCidrs: valid.allowedCidrs,
          description: valid.description,
          managedBy,
        });
        return { result: inserted, events: inserted ? [keyEvent('admin.key.create', inserted, actor)] : [] };
      });
      // A 32-bit lookup id can collide; draw again.
      if (record) return { key: generated.key, record };
    }
    throw new Error(`Could not draw an unused lookup id in ${MINT_ATTEMPTS} attempts`);
  }

  /** Revokes an active key; revoking a revoked key is a no-op that returns it. */
  async revoke(lookupId: string, actor: Actor): Promise<ApiKeyRecord> {
    const revoked = await this.writer.recordWith('internal', async (client) => {
      const record = await revokeApiKey(client, lookupId);
      return { result: record, events: record ? [keyEvent('admin.key.revoke', record, actor)] : [] };
    });
    if (revoked) return revoked;
    const existing = await this.find(lookupId);
    return existing;
  }

  /** Changes scopes, allow-list and description of an active key in place. */
  async updateGrants(lookupId: string, grants: KeyGrants, actor: Actor): Promise<ApiKeyRecord> {
    const valid = validateGrants(grants);
    const existing = await this.find(lookupId);
    if (existing.tenantId !== valid.tenantId) {
      throw new ConflictError('tenant_immutable', 'A key cannot move to another tenant; mint a new key instead.');
    }
    return this.writer.recordWith('internal', async (client) => {
      const updated = (await updateApiKeyGrants(client, lookupId, valid))!;
      return { result: updated, events: [keyEvent('admin.key.update', updated, actor)] };
    });
  }

  async find(lookupId: string): Promise<ApiKeyRecord> {
    const record = /^[0-9a-f]{8}$/.test(lookupId) ? await findApiKey(this.db, lookupId) : undefined;
    if (!record) throw new NotFoundError(`No key with lookup id ${lookupId}.`);
    return record;
  }

  /** The key a Kubernetes ApiKey resource owns, if it minted one. */
  findManaged(managedBy: string): Promise<ApiKeyRecord | undefined> {
    return findManagedApiKey(this.db, managedBy);
  }

  list(tenantId?: string): Promise<ApiKeyRecord[]> {
    return listApiKeys(this.db, tenantId);
  }
}

function validateGrants(grants: KeyGrants): Required<KeyGrants> {
  const problems: FieldProblem[] = [];
  if (!TENANT_ID_PATTERN.test(grants.tenantId)) {
    problems.push({ field: 'tenant', message: 'must be 1-64 letters, digits, _ or -, starting with a letter or digit' });
  }
  if (grants.scopes.length === 0) problems.push({ field: 'scopes', message: `must name at least one of ${SCOPES.join(', ')}` });
  for (const scope of grants.scopes) {
    if (!isScope(scope)) problems.push({ field: 'scopes', message: `unknown scope "${scope}"; known: ${SCOPES.join(', ')}` });
  }
  const allowedCidrs: string[] = [];
  for (const cidr of grants.allowedCidrs ?? []) {
    try {
      allowedCidrs.push(parseCidr(cidr).text);
    } catch (error) {
      problems.push({ field: 'cidr', message: (error as Error).message });
    }
  }
  const description = grants.description ?? '';
  if (description.length > DESCRIPTION_MAX_LENGTH) {
    problems.push({ field: 'description', message: `must be at most ${DESCRIPTION_MAX_LENGTH} characters` });
  }
  if (problems.length > 0) throw new ValidationError(problems, problems.map((p) => `${p.field}: ${p.message}`).join('; '));
  return { tenantId: grants.tenantId, scopes: [...new Set(grants.scopes)].sort(), allowedCidrs, description };
}

function keyEvent(action: string, record: ApiKeyRecord, actor: Actor): NewEvent {
  return adminEvent({
    tenantId: record.tenantId,
    action,
    actor,
    resourceType: 'api_key',
    resourceId: record.lookupId,
    // Never the key or its hash: only what an auditor needs to know about the grant.
    details: { scopes: record.scopes, allowed_cidrs: record.allowedCidrs, description: record.description, managed_by: record.managedBy },
  });
}
