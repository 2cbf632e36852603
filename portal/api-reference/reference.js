// The API reference page (/api/v2/public/docs/): Swagger UI rendering the OpenAPI document this service
// serves, from files of this service only. A script file rather than an inline one, which the page's CSP forbids.
/* global SwaggerUIBundle */
window.addEventListener('DOMContentLoaded', () => {
  SwaggerUIBundle({
    // Relative to the page: the document of the deployment that serves it, whatever its base URL.
    url: '../openapi.json',
    dom_id: '#reference',
    layout: 'BaseLayout',
    presets: [SwaggerUIBundle.presets.apis],
    deepLinking: true,
    // The public validator (validator.swagger.io) is another origin: never asked.
    validatorUrl: null,
    defaultModelsExpandDepth: 0,
    docExpansion: 'list',
  });
});
