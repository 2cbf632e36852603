/**
 * Imported first by the CLI, so that it runs before any dependency is evaluated: on an older Node, undici
 * fails while loading with a TypeError that says nothing about versions. This says what to do instead.
 * (The one module with work at import time: there is no earlier moment.)
 */
const REQUIRED_MAJOR = 24;

const major = Number(process.versions.node.split('.')[0]);
if (major < REQUIRED_MAJOR) {
  process.stderr.write(
    `audit-trail needs Node.js ${REQUIRED_MAJOR} or newer; this is ${process.version} (${process.execPath}).\n` +
      'In a clone of the repository, run it as `npx audit-trail ...`, which uses the Node 24 of node_modules/.bin,\n' +
      'or put that directory first on PATH: export PATH="$PWD/node_modules/.bin:$PATH"\n',
  );
  process.exit(1);
}

export {};
