import type { ValidateFunction } from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

interface Operation {
  responses: Record<
    string,
    { content?: Record<string, { schema: unknown }>; headers?: Record<string, unknown> }
  >;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
}

/**
 * Checks real responses against the served OpenAPI document: the status must be documented for
 * the operation, and the body must match the schema of its content type. Any drift between what
 * the API answers and what it documents fails the test that made the request.
 */
export class OpenApiResponseValidator {
  private readonly ajv: Ajv2020.default;
  private readonly routes: Array<{
    method: string;
    template: string;
    pattern: RegExp;
    operation: Operation;
  }> = [];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(document: OpenApiDocument) {
    this.ajv = new Ajv2020.default({ strict: false, allErrors: true });
    addFormats.default(this.ajv);
    this.ajv.addSchema(document as object, 'openapi.json');
    for (const [template, methods] of Object.entries(document.paths)) {
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      for (const [method, operation] of Object.entries(methods)) {
        this.routes.push({ method: method.toUpperCase(), template, pattern, operation });
      }
    }
    // Static segments win over parameters, as in the router.
    this.routes.sort((a, b) => a.template.split('{').length - b.template.split('{').length);
  }

  /** Returns a list of problems; empty when the response matches the document. */
  check(
    method: string,
    url: string,
    status: number,
    contentType: string | undefined,
    body: string,
    headers: Record<string, unknown> = {},
  ): string[] {
    const path = url.split('?')[0];
    const route = this.routes.find((r) => r.method === method && r.pattern.test(path));
    if (!route) return [`${method} ${path} is not in the OpenAPI document`];
    const response = route.operation.responses[String(status)];
    if (!response)
      return [`${method} ${route.template} answered ${status}, which is not documented`];
    const missing = Object.keys(response.headers ?? {}).filter(
      (name) => headers[name.toLowerCase()] === undefined,
    );
    if (missing.length > 0)
      return [`${method} ${route.template} ${status} lacks headers ${missing}`];
    if (!response.content)
      return body.length === 0 ? [] : [`${status} has a body but documents none`];
    const mediaType = (contentType ?? '').split(';')[0].trim();
    if (!response.content[mediaType]) {
      return [
        `${method} ${route.template} ${status} answered ${mediaType}, documented: ${Object.keys(response.content)}`,
      ];
    }
    const pointer = [
      'paths',
      route.template.replace(/~/g, '~0').replace(/\//g, '~1'),
      route.method.toLowerCase(),
      'responses',
      String(status),
      'content',
      mediaType.replace(/\//g, '~1'),
      'schema',
    ].join('/');
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `openapi.json#/${pointer}` });
      this.compiled.set(pointer, validate);
    }
    if (validate(JSON.parse(body))) return [];
    return (validate.errors ?? []).map(
      (e) => `${method} ${route.template} ${status}: ${e.instancePath} ${e.message}`,
    );
  }
}
