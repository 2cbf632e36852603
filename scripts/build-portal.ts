/**
 * Builds the customer portal into dist/portal/ (run by `make build`): esbuild bundles portal/src/main.tsx
 * (Preact, and the customer client's plain modules) into one minified ES module and one stylesheet, named
 * by their content's hash, and writes index.html naming them. Everything comes from npm packages in
 * node_modules: no network, no CDN, nothing loaded from another origin at run time.
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { build } from 'esbuild';

const root = join(import.meta.dirname, '..');
const out = join(root, 'dist/portal');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const result = await build({
  entryPoints: { app: join(root, 'portal/src/main.tsx'), styles: join(root, 'portal/src/styles.css') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['chrome120', 'firefox121', 'safari17'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  entryNames: '[name]-[hash]',
  outdir: out,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
  tsconfig: join(root, 'portal/tsconfig.json'),
});

const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
const js = outputs.find((name) => name.startsWith('app-') && name.endsWith('.js'));
const css = outputs.find((name) => name.startsWith('styles-') && name.endsWith('.css'));
if (!js || !css) throw new Error(`the portal build wrote no script or stylesheet: ${outputs.join(', ')}`);
const page = readFileSync(join(root, 'portal/index.html'), 'utf8').replace('{{js}}', `./${js}`).replace('{{css}}', `./${css}`);
writeFileSync(join(out, 'index.html'), page);
copyFileSync(join(root, 'portal/favicon.svg'), join(out, 'favicon.svg'));
console.log(`portal: dist/portal/${js}, ${css}, index.html`);
