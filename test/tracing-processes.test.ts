import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BACKENDS, createTestDatabase, type TestDatabase } from './helpers/context.ts';
import { type ChildService, startTourops } from './helpers/processes.ts';
import { until } from './helpers/until.ts';

// Tracing in real `tourops serve` processes: spans leave over OTLP/HTTP (JSON here) to a collector
// of the test's own on loopback; with the variables unset the SDK is never even loaded.

const ADMIN = 'admin-token-for-tracing-0123456789abcdef';
const RECORDER = fileURLToPath(new URL('./helpers/module-recorder.mjs', import.meta.url));

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  scope: string;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean };
const anyValue = (v: AnyValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue);
const attributesOf = (list: Array<{ key: string; value: AnyValue }> = []) =>
  Object.fromEntries(list.map((a) => [a.key, anyValue(a.value)]));

/** An OTLP/HTTP traces endpoint: every span of every JSON export it received. */
class Collector {
  readonly spans: ExportedSpan[] = [];
  requests = 0;
  private constructor(private readonly server: Server) {}

  static async start(): Promise<Collector> {
    const server = createServer();
    const collector = new Collector(server);
    server.on('request', (request, response) => {
      let body = '';
      request.setEncoding('utf8').on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        collector.requests += 1;
        if (request.url === '/v1/traces' && body.startsWith('{')) collector.add(JSON.parse(body));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return collector;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private add(document: {
    resourceSpans: Array<{
      resource: { attributes: Array<{ key: string; value: AnyValue }> };
      scopeSpans: Array<{ scope: { name: string }; spans: Array<Record<string, unknown>> }>;
    }>;
  }): void {
    for (const resourceSpans of document.resourceSpans) {
      const resource = attributesOf(resourceSpans.resource.attributes);
      for (const scopeSpans of resourceSpans.scopeSpans) {
        for (const span of scopeSpans.spans) {
          this.spans.push({
            ...(span as unknown as ExportedSpan),
            scope: scopeSpans.scope.name,
            attributes: attributesOf(span.attributes as never),
            resource,
          });
        }
      }
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A file for the module recorder, in a directory of its own removed after the test. */
function moduleLog(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'tourops-modules-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'modules.log');
}

/** A tenant and a token on a child server, through its admin API. */
async function tokenOf(server: ChildService): Promise<string> {
  const admin = (path: string, body: unknown) =>
    fetch(`${server.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ data: { id: string }; token?: string }>);
  const tenant = await admin('/admin/v1/tenants', { name: 'Traced', slug: 'traced', tier: 'pro' });
  const minted = await admin(`/admin/v1/tenants/${tenant.data.id}/tokens`, { scopes: ['*'] });
  return minted.token as string;
}

const createClient = (server: ChildService, token: string, traceparent: string) =>
  fetch(`${server.baseUrl}/api/v1/clients`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      traceparent,
    },
    body: JSON.stringify({ kind: 'individual', displayName: 'Traced' }),
  });

for (const backend of BACKENDS) {
  describe(`tracing in a real tourops serve (${backend})`, () => {
    let database: TestDatabase;
    let collector: Collector;

    before(async () => {
      database = await createTestDatabase(backend);
      collector = await Collector.start();
    });
    after(async () => {
      await collector.close();
      await database.drop();
    });

    it('exports the server span of the caller trace, the producer span and database spans over OTLP', async (t) => {
      const log = moduleLog(t);
      const server = await startTourops(['serve', '--no-worker'], {
        ...database.env,
        ADMIN_API_TOKEN: ADMIN,
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        NODE_OPTIONS: `--import=${RECORDER}`,
        MODULE_LOG: log,
        LOG_LEVEL: 'info',
      });
      try {
        const token = await tokenOf(server);
        const traceId = `5af7651916cd43dd8448eb211c8031${backend === 'sqlite' ? '01' : '02'}`;
        const response = await createClient(server, token, `00-${traceId}-b7ad6b7169203331-01`);
        assert.equal(response.status, 201);
        const requestId = response.headers.get('service-request-id');
        const mine = await until(() => {
          const found = collector.spans.filter((s) => s.traceId === traceId);
          // Spans of one request can leave in different exports: wait for both ends.
          const done =
            found.some((s) => s.kind === 4) &&
            found.some((s) => s.kind === 2 && s.scope === '@opentelemetry/instrumentation-http');
          return done ? found : undefined;
        }, 'spans of the caller trace');
        const server_ = mine.find(
          (s) => s.kind === 2 && s.scope === '@opentelemetry/instrumentation-http',
        );
        assert.ok(server_, `an HTTP server span: ${mine.map((s) => s.name).join(', ')}`);
        assert.equal(server_.name, 'POST /api/v1/clients');
        assert.equal(server_.parentSpanId, 'b7ad6b7169203331');
        assert.equal(server_.attributes['tourops.request_id'], requestId);
        assert.equal(server_.resource['service.name'], 'tourops');
        assert.ok(mine.some((s) => s.kind === 4 && s.name === 'create client.created'));
        const statements =
          backend === 'postgres'
            ? mine.filter((s) => s.scope === '@opentelemetry/instrumentation-pg')
            : mine.filter((s) => s.attributes['db.system.name'] === 'sqlite');
        assert.ok(statements.length > 0, `database spans: ${mine.map((s) => s.scope).join(', ')}`);
        // The request's log line names its trace.
        assert.match(server.output(), new RegExp(`"traceId":"${traceId}","spanId":"[0-9a-f]{16}"`));
        const loaded = readFileSync(log, 'utf8');
        assert.match(loaded, /@opentelemetry\/sdk-node/, 'the recorder sees the SDK load');
      } finally {
        await server.stop();
      }
    });

    it('loads no SDK module and exports nothing with the variables unset', async (t) => {
      const log = moduleLog(t);
      const before = collector.requests;
      const server = await startTourops(['serve', '--no-worker'], {
        ...database.env,
        ADMIN_API_TOKEN: ADMIN,
        NODE_OPTIONS: `--import=${RECORDER}`,
        MODULE_LOG: log,
      });
      try {
        const response = await fetch(`${server.baseUrl}/readyz`, {
          headers: { traceparent: '00-6af7651916cd43dd8448eb211c803101-b7ad6b7169203331-01' },
        });
        assert.equal(response.status, 200);
      } finally {
        await server.stop();
      }
      // A stop flushes what an exporter holds (serve.ts, on SIGTERM): nothing came.
      assert.equal(collector.requests, before, 'nothing exported');
      assert.ok(existsSync(log));
      const loaded = readFileSync(log, 'utf8');
      assert.match(
        loaded,
        /node_modules\/fastify\//,
        "the recorder saw the application's modules load",
      );
      assert.doesNotMatch(
        loaded,
        /@opentelemetry\/(sdk-|instrumentation|exporter-)|@fastify\/otel/,
      );
    });
  });
}
