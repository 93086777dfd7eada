import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BACKENDS } from './helpers/context.ts';
import { describeFinding, fuzz } from './helpers/fuzz.ts';
import { type FuzzTarget, startFuzzTarget } from './helpers/fuzz-target.ts';

// Bounded: a fixed number of requests per backend, cut short by a time budget on a slow machine
// (never below the minimum). FUZZ_SEED replays a failure; FUZZ_REQUESTS asks for more.
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3_000);
const MINIMUM = Math.min(REQUESTS, 1_000);
const BUDGET_MS = 40_000;

for (const backend of BACKENDS) {
  describe(`fuzz from the served OpenAPI documents (${backend})`, () => {
    let target: FuzzTarget;
    before(async () => {
      target = await startFuzzTarget(backend);
    });
    after(() => target.close());

    it('answers every generated request without a 5xx, a non-problem error or a leak', async () => {
      const report = await fuzz({
        origin: target.origin,
        operations: target.operations,
        credentials: target.credentials,
        count: REQUESTS,
        seed: SEED,
        deadline: Date.now() + BUDGET_MS,
        minimum: MINIMUM,
      });
      assert.ok(report.requests >= MINIMUM, `only ${report.requests} requests`);
      // Every operation of both documents was exercised.
      const missing = target.operations
        .map((op) => `${op.method} ${op.path}`)
        .filter((name) => !report.byOperation.has(name));
      assert.ok(
        report.requests < 2_000 || missing.length === 0,
        `never fuzzed: ${missing.join(', ')}`,
      );
      const statuses = [...report.byStatus.keys()];
      assert.ok(statuses.some((s) => s < 300) && statuses.includes(422), `statuses ${statuses}`);
      if (report.findings.length > 0) {
        assert.fail(
          `${report.findings.length} of ${report.requests} answers failed (replay: FUZZ_SEED=${SEED} ` +
            `FUZZ_REQUESTS=${REQUESTS}, or npm run fuzz -- --seed ${SEED} --requests ${REQUESTS} --backend ${backend}):\n` +
            report.findings.slice(0, 10).map(describeFinding).join('\n'),
        );
      }
    });
  });
}
