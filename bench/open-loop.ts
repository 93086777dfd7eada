/**
 * The open-loop generator, in a process of its own (see runOpenLoopWindow): requests leave on a
 * fixed schedule (`rate` a second, issued by a 1 ms ticker) whatever the answers, over a pool of
 * keep-alive connections, and each latency counts from the request's scheduled time. In the
 * benchmark's own process its garbage collection, over the state of every row measured before,
 * held its event loop up to 27 ms, and those pauses landed in the measured tail.
 *
 *   BENCH_OPEN_LOOP=<json: url, headers, connections, rate, warmupSec, durationSec, and for a
 *                   write: method, body, idempotencyKeys>
 *   node --import tsx bench/open-loop.ts   (with an IPC channel)
 *
 * Messages to the parent: `{ kind: 'measuring' }` when the measured part opens, then
 * `{ kind: 'done', … }` with its counts, latencies, CPU and longest event-loop pause.
 */
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';

export interface OpenLoopConfig {
  url: string;
  headers?: Record<string, string>;
  /** GET when omitted. */
  method?: 'GET' | 'POST';
  body?: string;
  /** A fresh Idempotency-Key on every request. */
  idempotencyKeys?: boolean;
  connections: number;
  rate: number;
  warmupSec: number;
  durationSec: number;
}

export interface OpenLoopResult {
  kind: 'done';
  requests: number;
  non2xx: number;
  /** Errors, and requests still unanswered 10 s after the last was due. */
  errors: number;
  /** The errors by their words (the code, else the message), at most a few kinds. */
  errorKinds: Record<string, number>;
  statusCodes: Record<string, number>;
  bytes: number;
  /** Latencies of the 2xx answers of the measured part, ms. */
  latencies: number[];
  /** This process's CPU over the measured part (and the last answers), s. */
  cpuSec: number;
  /** The longest this process's event loop was held up in the measured part, ms. */
  stallMs: number;
}

/** Error kinds kept apart in a result; the rest are counted in `errors` only. */
const MAX_ERROR_KINDS = 5;

async function run(config: OpenLoopConfig): Promise<OpenLoopResult> {
  const target = new URL(config.url);
  const pool = new Pool(target.origin, { connections: config.connections, pipelining: 1 });
  const path = target.pathname + target.search;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  let requests = 0;
  let non2xx = 0;
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  let bytes = 0;
  const stalls = monitorEventLoopDelay({ resolution: 1 });
  let cpuFrom: NodeJS.CpuUsage | null = null;
  const interval = 1000 / config.rate;
  const began = performance.now();
  const measureFrom = began + config.warmupSec * 1000;
  const end = measureFrom + config.durationSec * 1000;
  const inFlight = new Set<Promise<void>>();
  const send = (scheduled: number) => {
    const counted = scheduled >= measureFrom;
    const headers = config.idempotencyKeys
      ? { ...config.headers, 'idempotency-key': randomUUID() }
      : config.headers;
    const done: Promise<void> = pool
      .request({ path, method: config.method ?? 'GET', headers, body: config.body })
      .then(async (response) => {
        // Counted chunk by chunk: a copy of every 40 KB page doubled the garbage.
        let length = 0;
        for await (const chunk of response.body) length += (chunk as Buffer).length;
        if (!counted) return;
        statusCodes[response.statusCode] = (statusCodes[response.statusCode] ?? 0) + 1;
        if (response.statusCode >= 200 && response.statusCode < 300) {
          latencies.push(performance.now() - scheduled);
          requests++;
          bytes += length;
        } else {
          non2xx++;
        }
      })
      .catch((error: Error & { code?: string }) => {
        if (!counted) return;
        errors++;
        // An invalid run says why: a refused connection, a reset, a time-out of the pool's.
        const kind = `${error.code ?? error.name}: ${error.message}`.slice(0, 200);
        if (kind in errorKinds || Object.keys(errorKinds).length < MAX_ERROR_KINDS) {
          errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
        }
      })
      .finally(() => inFlight.delete(done));
    inFlight.add(done);
  };
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      if (cpuFrom === null && now >= measureFrom) {
        cpuFrom = process.cpuUsage();
        stalls.enable();
        process.send?.({ kind: 'measuring' });
      }
      for (
        let at = began + next * interval;
        at <= now && at < end;
        at = began + ++next * interval
      ) {
        send(at);
      }
      if (now >= end) {
        stalls.disable();
        resolve();
      } else setTimeout(tick, 1);
    };
    tick();
  });
  // The last requests' answers (bounded: a request that never answers is an error).
  await Promise.race([
    Promise.all(inFlight),
    new Promise((resolve) => setTimeout(resolve, 10_000)),
  ]);
  const cpu = process.cpuUsage(cpuFrom ?? undefined);
  const unanswered = inFlight.size;
  await pool.destroy();
  return {
    kind: 'done',
    requests,
    non2xx,
    errors: errors + unanswered,
    errorKinds: unanswered > 0 ? { ...errorKinds, unanswered } : errorKinds,
    statusCodes,
    bytes,
    latencies,
    cpuSec: (cpu.user + cpu.system) / 1e6,
    stallMs: stalls.max / 1e6,
  };
}

const config = JSON.parse(process.env.BENCH_OPEN_LOOP ?? 'null') as OpenLoopConfig | null;
if (!config || !process.send) {
  process.stderr.write('open-loop: BENCH_OPEN_LOOP and an IPC channel are needed\n');
  process.exit(2);
}
const result = await run(config);
process.send(result, () => process.exit(0));
