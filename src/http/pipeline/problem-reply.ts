import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { CODE_FORMATS } from '../../domain/codes.ts';
import {
  ApiProblem,
  type FieldErrors,
  notFound,
  PROBLEM_TYPES,
  validationFailed,
} from '../../lib/problems.ts';
import { BODY_LIMIT_BYTES } from './json-body.ts';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** A problem's JSON text; serialized by hand because its extra members vary by type. */
export function problemBody(problem: ApiProblem, errorsBaseUrl: string): string {
  return JSON.stringify({
    type: `${errorsBaseUrl}/${problem.slug}`,
    title: PROBLEM_TYPES[problem.slug].title,
    status: problem.status,
    detail: problem.detail,
    ...problem.extra,
  });
}

/** Renders a problem. */
export function sendProblem(
  reply: FastifyReply,
  problem: ApiProblem,
  errorsBaseUrl: string,
): FastifyReply {
  for (const [name, value] of Object.entries(problem.headers)) reply.header(name, value);
  return reply
    .code(problem.status)
    .type(PROBLEM_CONTENT_TYPE)
    .send(problemBody(problem, errorsBaseUrl));
}

interface AjvError {
  keyword: string;
  instancePath: string;
  schemaPath?: string;
  message?: string;
  params: Record<string, unknown>;
}

/** `/tags/3` → `tags.3`; the schema root of a body is reported as `body`. */
function fieldPath(pointer: string, child?: unknown): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (typeof child === 'string') parts.push(child);
  return parts.length === 0 ? 'body' : parts.join('.');
}

/**
 * A failed union (`anyOf`) whose value names its branch, as `{type: "basic", …}` does, or is of
 * only one branch's JSON type, is judged by that branch alone: its own faults, not every branch's
 * and "must match a schema in anyOf". A branch is ruled out when the value's `type` member is
 * missing or is not the branch's constant, or the value is not of the branch's JSON type. When
 * every branch is ruled out by the `type` member, that member is the one fault. Every validator
 * here reports all errors (allErrors), so each branch's own verdict on `type` is there.
 */
function narrowUnions(errors: AjvError[]): AjvError[] {
  let out = errors;
  for (const union of errors) {
    if (union.keyword !== 'anyOf' || union.schemaPath === undefined) continue;
    const prefix = `${union.schemaPath}/`;
    const branches = new Map<string, AjvError[]>();
    for (const error of out) {
      if (!error.schemaPath?.startsWith(prefix)) continue;
      const branch = error.schemaPath.slice(prefix.length).split('/')[0];
      branches.set(branch, [...(branches.get(branch) ?? []), error]);
    }
    const tag = `${union.instancePath}/type`;
    const wrongTag = (e: AjvError) => e.keyword === 'const' && e.instancePath === tag;
    const noTag = (e: AjvError) =>
      e.keyword === 'required' &&
      e.instancePath === union.instancePath &&
      e.params.missingProperty === 'type';
    const wrongType = (e: AjvError) =>
      e.keyword === 'type' && e.instancePath === union.instancePath;
    const faults = [...branches.values()];
    const open = faults.filter((f) => !f.some((e) => wrongTag(e) || noTag(e) || wrongType(e)));
    const inUnion = (e: AjvError) => e === union || e.schemaPath?.startsWith(prefix) === true;
    const rest = out.filter((e) => !inUnion(e));
    const tags = faults.flat().filter(wrongTag);
    const missing = faults.flat().find(noTag);
    if (open.length === 1) {
      const kept = new Set(open[0]);
      out = out.filter((e) => !inUnion(e) || kept.has(e));
    } else if (open.length === 0 && missing !== undefined) {
      out = [...rest, missing];
    } else if (open.length === 0 && tags.length > 0) {
      // An object whose `type` names no branch: that member is the fault, with the choices.
      const allowedValues = tags.map((e) => e.params.allowedValue);
      out = [...rest, { keyword: 'enum', instancePath: tag, params: { allowedValues } }];
    }
  }
  return out;
}

function fieldErrorsFromAjv(all: AjvError[]): FieldErrors {
  const errors = narrowUnions(all);
  // No prototype: a member named `toString` or `constructor` is a field like any other.
  const out: FieldErrors = Object.create(null);
  const add = (path: string, message: string) => {
    if (!out[path]) out[path] = [];
    if (!out[path].includes(message)) out[path].push(message);
  };
  for (const error of errors) {
    if (error.keyword === 'required') {
      add(fieldPath(error.instancePath, error.params.missingProperty), 'is required');
    } else if (error.keyword === 'additionalProperties') {
      add(
        fieldPath(error.instancePath, error.params.additionalProperty),
        'is not an allowed member',
      );
    } else if (
      error.keyword === 'format' &&
      Object.hasOwn(CODE_FORMATS, String(error.params.format))
    ) {
      add(
        fieldPath(error.instancePath),
        CODE_FORMATS[error.params.format as keyof typeof CODE_FORMATS].message,
      );
    } else if (error.keyword === 'enum') {
      const allowed = (error.params.allowedValues as unknown[]).join(', ');
      add(fieldPath(error.instancePath), `must be one of: ${allowed}`);
    } else {
      add(fieldPath(error.instancePath), error.message ?? 'is invalid');
    }
  }
  return out;
}

/**
 * Maps Fastify's own errors (parsing, body size, content type, schema validation) to the one
 * status the spec allows for bad input: 422. Anything else that is not an ApiProblem is a fault.
 */
export function toProblem(error: FastifyError | ApiProblem | Error): ApiProblem | null {
  if (error instanceof ApiProblem) return error;
  const fastifyError = error as FastifyError & { validation?: AjvError[] };
  if (fastifyError.validation) {
    return validationFailed(fieldErrorsFromAjv(fastifyError.validation));
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return validationFailed(
        { body: ['Content-Type must be application/json'] },
        'The request body must be sent as Content-Type: application/json.',
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return validationFailed(
        { body: [`must be at most ${BODY_LIMIT_BYTES} bytes`] },
        `The request body is larger than ${BODY_LIMIT_BYTES / 1024} KB.`,
      );
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return validationFailed({ body: ['is empty'] }, 'The request body is empty.');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return validationFailed(
        { body: ['is not valid JSON'] },
        'The request body is not valid JSON.',
      );
  }
  const status = fastifyError.statusCode ?? 500;
  if (status === 404) return notFound('The route');
  if (status >= 400 && status < 500) {
    // Bad JSON (SyntaxError), bad content length, proto poisoning and the like.
    return validationFailed({ body: [error.message] }, error.message);
  }
  return null;
}

export function internalProblem(request: FastifyRequest): ApiProblem {
  return new ApiProblem(
    'internal',
    `An unexpected error occurred. Quote request id ${request.id} when reporting it.`,
    { requestId: request.id },
  );
}
