/**
 * Builds the API reference page into dist/api-reference/ (run by `make build`): Swagger UI's prebuilt bundle
 * and stylesheet (the swagger-ui-dist package, a devDependency: nothing is fetched at build or run time) and
 * the page's own script and stylesheet, each named by its content's hash, and index.html naming them. The
 * page renders /api/v2/public/openapi.json of the service that serves it (src/http/apiReferencePages.ts).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = join(import.meta.dirname, '..');
const source = join(root, 'portal/api-reference');
const swagger = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const out = join(root, 'dist/api-reference');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

/** Writes the file under a name carrying its hash; the source map comment goes (the maps are not served). */
function publish(path: string, stem: string, extension: string): string {
  const text = readFileSync(path, 'utf8').replace(/\n?\/[/*]# sourceMappingURL=\S+(?: \*\/)?\s*$/, '\n');
  const name = `${stem}-${createHash('sha256').update(text).digest('base64url').slice(0, 12)}.${extension}`;
  writeFileSync(join(out, name), text);
  return name;
}

const names: Record<string, string> = {
  'swagger.js': publish(join(swagger, 'swagger-ui-bundle.js'), 'swagger-ui', 'js'),
  'swagger.css': publish(join(swagger, 'swagger-ui.css'), 'swagger-ui', 'css'),
  'reference.js': publish(join(source, 'reference.js'), 'reference', 'js'),
  'reference.css': publish(join(source, 'reference.css'), 'reference', 'css'),
};
let page = readFileSync(join(source, 'index.html'), 'utf8');
for (const [placeholder, name] of Object.entries(names)) page = page.replace(`{{${placeholder}}}`, `./${name}`);
writeFileSync(join(out, 'index.html'), page);
// Swagger UI's licence travels with its code.
writeFileSync(join(out, 'swagger-ui-LICENSE.txt'), readFileSync(join(swagger, 'LICENSE')));
console.log(`api reference: dist/api-reference/${Object.values(names).join(', ')}, index.html`);
