import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { ApiTransport } from '../apiTransport.ts';
import { isKeyName, LOG_SIGNATURE_TYPE, parseVerifierKey } from '../signedNote.ts';
import { witnessOnce, witnessVerifierKey } from '../witness.ts';
import { apiConnection } from './connection.ts';
import { URL_OPTION } from './commandOptions.ts';
import { CLIENT_VERSION, UsageError } from './usage.ts';

/**
 * `audit-trail-client witness`: the tenant's own witness of its log (client/witness.ts). `keygen` makes the
 * witness's Ed25519 key and prints its vkey; a run fetches the checkpoint, checks it against the one kept in
 * --state, co-signs it and posts the cosignature. Exits 0 when it co-signed, 1 when it refused (the
 * evidence's directory is named), 2 for a usage mistake.
 */
export async function runWitness(args: string[], out: NodeJS.WritableStream = process.stdout): Promise<number> {
  if (args[0] === 'keygen') return keygen(args.slice(1), out);
  const { values } = parseArgs({
    args,
    options: { ...URL_OPTION, 'log-key': { type: 'string' }, name: { type: 'string' }, key: { type: 'string' }, state: { type: 'string' } },
  });
  if (!values['log-key'] || !values.name || !values.key || !values.state) {
    throw new UsageError('--log-key, --name, --key and --state are required');
  }
  const logKeyText = values['log-key'].startsWith('@') ? await readFile(values['log-key'].slice(1), 'utf8') : values['log-key'];
  let logKey: ReturnType<typeof parseVerifierKey>;
  try {
    logKey = parseVerifierKey(logKeyText);
  } catch (error) {
    throw new UsageError(`--log-key: ${(error as Error).message}`);
  }
  if (logKey.type !== LOG_SIGNATURE_TYPE) throw new UsageError("--log-key is the log's verifier key (GET /audit/integrity/verifier-key)");
  const { baseUrl, apiKey } = apiConnection(values.url);
  const outcome = await witnessOnce({
    api: new ApiTransport({ baseUrl, apiKey, userAgent: `audit-trail-client/${CLIENT_VERSION}` }),
    logKey,
    name: values.name,
    privateKey: createPrivateKey(await readFile(values.key)),
    stateDirectory: values.state,
  });
  if (outcome.kind === 'refused') {
    process.stderr.write(`refused to cosign ${outcome.origin}: ${outcome.reason}; evidence kept in ${outcome.evidence}\n`);
    return 1;
  }
  out.write(`cosigned ${outcome.origin} at ${outcome.size} leaves (consistent with ${outcome.previousSize})\n`);
  return 0;
}

async function keygen(args: string[], out: NodeJS.WritableStream): Promise<number> {
  const { values } = parseArgs({ args, options: { name: { type: 'string' }, key: { type: 'string' } } });
  if (!values.name || !values.key) throw new UsageError('witness keygen needs --name and --key');
  if (!isKeyName(values.name)) throw new UsageError('--name is a key name: no spaces, no plus (e.g. witness.example.com/audit)');
  const { privateKey } = generateKeyPairSync('ed25519');
  await writeFile(values.key, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  out.write(`${witnessVerifierKey(values.name, privateKey)}\n`);
  return 0;
}
