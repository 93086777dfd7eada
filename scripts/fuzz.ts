import { parseArgs } from 'node:util';
import { BACKENDS, type Backend } from '../test/helpers/context.ts';
import { describeFinding, fuzz } from '../test/helpers/fuzz.ts';
import { startFuzzTarget } from '../test/helpers/fuzz-target.ts';

const HELP = `npm run fuzz -- [--requests N] [--backend sqlite|postgres|all] [--seed N] [--concurrency N]

Sends N requests generated from the served OpenAPI documents (public and admin; valid and hostile
bodies, queries, path ids, headers, raw requests for the HTTP parser, and the portal's forms in a
signed-in session) to a real server on a loopback port over a fresh database, and judges every
answer: no 5xx, every API error application/problem+json (every portal error a page), a
Service-Request-Id under /api/v1, no internal message or stack, a documented status. Prints a summary; exits 1 on any finding. PostgreSQL needs TEST_DATABASE_URL
(a fresh database is created on that server and dropped after).`;

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    backend: { type: 'string', default: 'all' },
    seed: { type: 'string' },
    concurrency: { type: 'string', default: '8' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const requests = Number(values.requests);
const seed = values.seed === undefined ? Date.now() % 2 ** 31 : Number(values.seed);
const backends: Backend[] =
  values.backend === 'all'
    ? BACKENDS
    : [values.backend as Backend].filter((b) => ['sqlite', 'postgres'].includes(b));
if (
  !Number.isInteger(requests) ||
  requests < 1 ||
  backends.length === 0 ||
  !Number.isInteger(seed)
) {
  console.error(HELP);
  process.exit(2);
}
if (backends.includes('postgres') && !process.env.TEST_DATABASE_URL) {
  console.error('fuzz: --backend postgres needs TEST_DATABASE_URL=postgres://…');
  process.exit(2);
}

let failed = false;
for (const backend of backends) {
  const target = await startFuzzTarget(backend);
  const started = Date.now();
  try {
    const report = await fuzz({
      origin: target.origin,
      operations: target.operations,
      credentials: target.credentials,
      count: requests,
      seed,
      concurrency: Number(values.concurrency),
      onProgress: (done) => {
        if (done % 10_000 === 0) process.stderr.write(`  ${backend}: ${done} requests\n`);
      },
    });
    const seconds = (Date.now() - started) / 1000;
    const statuses = [...report.byStatus.entries()].sort(([a], [b]) => a - b);
    const fivexx = statuses.filter(([s]) => s >= 500 && s !== 501).reduce((n, [, c]) => n + c, 0);
    const classes = new Map<string, typeof report.findings>();
    for (const finding of report.findings) {
      const key = finding.problem.replace(/\d{3}/g, 'NNN').slice(0, 60);
      classes.set(key, [...(classes.get(key) ?? []), finding]);
    }
    console.log(
      `\n${backend}: ${report.requests} requests in ${seconds.toFixed(1)} s, seed ${seed}`,
    );
    console.log(
      `  operations: ${report.byOperation.size} (of ${target.operations.length} documented, plus raw requests and portal forms)`,
    );
    console.log(`  statuses: ${statuses.map(([s, c]) => `${s}×${c}`).join(' ')}`);
    console.log(`  5xx: ${fivexx}; findings: ${report.findings.length}`);
    for (const [key, findings] of classes) {
      console.log(`  - ${findings.length} × ${key}\n    e.g. ${describeFinding(findings[0])}`);
    }
    if (report.findings.length > 0) failed = true;
  } finally {
    await target.close();
  }
}
process.exit(failed ? 1 : 0);
