/**
 * The bare reference servers the benchmark measures the API against, run as child processes
 * exactly like the API (same connections, duration and warm-up):
 *
 * - `REFERENCE=json`: Fastify with one route answering a small constant JSON object;
 * - `REFERENCE=pg`: Fastify with one route doing one primary-key query through a `pg.Pool`
 *   (same pool size as the API's) and answering the row as JSON.
 *
 * No logger, no hooks, no schemas, no authentication: the floor an API route cannot go below.
 */
import Fastify from 'fastify';
import pg from 'pg';

const mode = process.env.REFERENCE ?? 'json';
const port = Number(process.env.PORT ?? '0');
const host = '127.0.0.1';

const app = Fastify({ logger: false });
let pool: pg.Pool | null = null;

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
