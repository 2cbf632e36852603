/**
 * The environment for npm in tests that pack or install packages: offline, so that `make test` needs no
 * registry once its own `npm ci` has run. Installs come from npm's cache (`~/.npm`, which that `npm ci` filled
 * with every package of package-lock.json); a package missing from it fails at once with ENOTCACHED instead
 * of waiting on a registry that may be unreachable, slow, or not the one this machine is configured for.
 */
export function offlineNpmEnvironment(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...base,
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  };
}

/** Says what to do when an offline install finds a package missing from the cache; other failures pass through. */
export function explainOfflineFailure(error: unknown): never {
  const text = `${(error as { stderr?: string }).stderr ?? ''}${(error as Error).message ?? ''}`;
  if (/ENOTCACHED/.test(text)) {
    throw new Error(`npm's cache lacks a package of package-lock.json; \`npm ci\` (make install) fills it. ${text}`);
  }
  throw error;
}
