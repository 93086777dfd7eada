import type { FastifyInstance } from 'fastify';

interface Collection {
  variable?: Array<Record<string, unknown>>;
  [key: string]: unknown;
}

/**
 * The served OpenAPI document as a Postman collection: one folder per tag, the examples as data.
 * The converter is a large module graph, loaded on the first request rather than at start.
 */
async function toCollection(document: object): Promise<Collection> {
  const { convertV2 } = await import('openapi-to-postmanv2');
  return new Promise((resolve, reject) => {
    convertV2(
      { type: 'json', data: document as never },
      {
        folderStrategy: 'Tags',
        parametersResolution: 'Example',
        requestNameSource: 'Fallback',
      } as never,
      (error, result) => {
        if (error) return reject(error);
        const output = result as {
          result: boolean;
          reason?: string;
          output?: Array<{ data: Collection }>;
        };
        const collection = output.output?.[0]?.data;
        if (!output.result || !collection)
          return reject(new Error(output.reason ?? 'no collection'));
        resolve(collection);
      },
    );
  });
}

/**
 * `GET /v1/postman.json`: the public document converted once (on first request) by the maintained
 * converter. The converter names the bearer token `{{bearerToken}}`; it is declared here as a
 * collection variable, empty, for the user to fill, beside `{{baseUrl}}` (PUBLIC_BASE_URL).
 */
export function registerPostmanCollection(app: FastifyInstance): void {
  let collection: Promise<string> | undefined;
  app.get('/v1/postman.json', { schema: { hide: true } }, async (_request, reply) => {
    collection ??= toCollection(app.swagger()).then((converted) => {
      converted.variable = [
        ...(converted.variable ?? []),
        {
          key: 'bearerToken',
          value: '',
          type: 'secret',
          description: 'An API token, tk_live_… or tk_test_… (sent as Authorization: Bearer).',
        },
      ];
      return JSON.stringify(converted);
    });
    // A failed conversion is not cached: the next request tries again.
    const body = await collection.catch((error: unknown) => {
      collection = undefined;
      throw error;
    });
    return reply
      .type('application/json')
      .header('content-disposition', 'attachment; filename="tourops.postman_collection.json"')
      .send(body);
  });
}
