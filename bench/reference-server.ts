/**
 * The bare reference servers the benchmark measures the API against, run as child processes
 * exactly like the API (same connections, duration and warm-up):
 *
 * - `REFERENCE=json`: Fastify with one route answering a small constant JSON object;
 * - `REFERENCE=pg`: Fastify with one route doing one primary-key query through a `pg.Pool`
 *   (same pool size as the API's) and answering the row as JSON;
 * - both `pg` and `REFERENCE=page-sqlite` (better-sqlite3 on DATA_DIR's file, read only) answer
 *   `GET /page?tenant=…&after=…` with the API's page of 50 trips: the same keyset SQL, its rows
 *   serialized by the API's own response schema (`{data: Trip[], meta}`), the cursor encoded the
 *   same way; columns are aliased to the schema's names in SQL, the cheapest way to get there.
 *   `page-sqlite` also answers `GET /trips/:id?tenant=…` with the API's single read: the same
 *   primary-key read on the tenant, serialized by the API's schema (`{data: Trip}`).
 *
 * No logger, no hooks, no authentication: the floor an API route cannot go below.
 */
import { Type } from '@sinclair/typebox';
import BetterSqlite3 from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';
import { Trip } from '../src/domain/resources.ts';
import { DataOf, Meta, PageOf } from '../src/http/schemas.ts';
import { encodeCursor } from '../src/lib/cursor.ts';

/** The Trip schema's members, as `column as "member"`. */
const TRIP_COLUMNS = Object.keys(Trip.properties)
  .map((member) => `${member.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)} as "${member}"`)
  .join(', ');
const PAGE = 50;

const mode = process.env.REFERENCE ?? 'json';
const port = Number(process.env.PORT ?? '0');
const host = '127.0.0.1';

const app = Fastify({ logger: false });
let pool: pg.Pool | null = null;

type PageQuery = { Querystring: { tenant: string; after: string } };
/** The page route over `select`, which returns up to PAGE + 1 rows after `after`. */
function pageRoute(select: (tenant: string, after: string) => Promise<Array<{ id: string }>>) {
  app.addSchema(Meta);
  app.addSchema(Trip);
  app.get<PageQuery>(
    '/page',
    { schema: { response: { 200: PageOf(Type.Ref(Trip)) } } },
    async (request) => {
      const rows = await select(request.query.tenant, request.query.after);
      const hasMore = rows.length > PAGE;
      const data = hasMore ? rows.slice(0, PAGE) : rows;
      return {
        data,
        meta: { cursor: hasMore ? encodeCursor('trips', data[PAGE - 1].id) : null, hasMore },
      };
    },
  );
}

if (mode === 'json') {
  app.get('/', async () => ({ hello: 'world', ok: true, n: 42 }));
} else if (mode === 'pg') {
  pool = new pg.Pool({
    connectionString: process.env.DATABASE_URL,
    max: Number(process.env.POOL_SIZE ?? '10'),
  });
  const database = pool;
  app.get<{ Params: { id: string } }>('/trips/:id', async (request, reply) => {
    const { rows } = await database.query('select * from trips where id = $1', [request.params.id]);
    if (rows.length === 0) return reply.code(404).send({ error: 'not found' });
    return { data: rows[0] };
  });
  pageRoute(async (tenant, after) => {
    const { rows } = await database.query(
      `select ${TRIP_COLUMNS} from trips where tenant_id = $1 and id > $2 order by id limit $3`,
      [tenant, after, PAGE + 1],
    );
    return rows;
  });
} else if (mode === 'page-sqlite') {
  const sqlite = new BetterSqlite3(`${process.env.DATA_DIR}/tourops.sqlite`, { readonly: true });
  const statement = sqlite.prepare(
    `select ${TRIP_COLUMNS} from trips where tenant_id = ? and id > ? order by id limit ?`,
  );
  pageRoute(
    async (tenant, after) => statement.all(tenant, after, PAGE + 1) as Array<{ id: string }>,
  );
  const byId = sqlite.prepare(`select ${TRIP_COLUMNS} from trips where tenant_id = ? and id = ?`);
  app.get<{ Params: { id: string }; Querystring: { tenant: string } }>(
    '/trips/:id',
    { schema: { response: { 200: DataOf(Type.Ref(Trip)) } } },
    async (request, reply) => {
      const row = byId.get(request.query.tenant, request.params.id);
      if (row === undefined) return reply.code(404).send({ error: 'not found' });
      return { data: row };
    },
  );
} else {
  throw new Error(`REFERENCE: unknown mode ${mode}`);
}

app.get('/healthz', async () => ({ status: 'ok' }));

await app.listen({ port, host });

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await app.close();
  await pool?.end();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
