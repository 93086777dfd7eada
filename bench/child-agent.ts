/**
 * Preloaded (`--import`) into every server the benchmark spawns, in front of the unmodified entry
 * point (`src/main.ts` or `bench/reference-server.ts`). It adds two things over the IPC channel:
 *
 * - the server exits as soon as the benchmark process goes away, even if that process was killed
 *   with SIGKILL and could not clean up after itself;
 * - `cpu-profile-start` / `cpu-profile-stop` messages record a V8 CPU profile of exactly the
 *   measurement window (not start-up, not warm-up), written to the file the benchmark names.
 *
 * - `retention-purge` runs the worker's retention purge now and answers with its report (see
 *   BENCH_RETENTION below);
 * - `gc-stats` answers with how many mark-compacts the child has run so far (the open-loop rows
 *   report those of their window: each one's concurrent marking takes a core for a while).
 *
 * Without an IPC channel (run by hand) it does nothing.
 */
import cluster from 'node:cluster';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { constants, PerformanceObserver } from 'node:perf_hooks';

type Message =
  | { type: 'cpu-profile-start'; intervalUs?: number }
  | { type: 'cpu-profile-stop'; file: string }
  | { type: 'retention-purge' }
  | { type: 'gc-stats' };

// The "rate limiting off" API child: the limiter's checks become no-ops (module instances are
// shared, so src/main.ts sees the patched class). A measurement seam only; the product has no switch.
if (process.env.BENCH_RATE_LIMITS === 'off') {
  const { RateLimits } = await import('../src/rate-limit/rate-limits.ts');
  RateLimits.prototype.checkIp = () => null;
  RateLimits.prototype.checkToken = () => ({
    allowed: true,
    state: { limit: 0, remaining: 0, resetSeconds: 1 },
  });
}

// The retention row's API child: its worker's sweeper does not purge on its timer; the benchmark
// starts the purge over IPC when its load is running (the same seam kind as above).
let sweeper: { runNow(): Promise<unknown> } | null = null;
if (process.env.BENCH_RETENTION === 'manual') {
  const { RetentionSweeper } = await import('../src/services/retention-sweeper.ts');
  RetentionSweeper.prototype.start = function captured(
    this: InstanceType<typeof RetentionSweeper>,
  ) {
    sweeper = this;
  };
}

// Not in the API processes a `serve --processes` primary forks (they inherit its flags): their
// channel is node:cluster's, which keeps them alive while the primary hands them the port.
if (process.send && process.channel && !cluster.isWorker) {
  process.channel.unref();
  process.on('disconnect', () => process.exit(0));

  let markCompacts = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) markCompacts++;
    }
  }).observe({ entryTypes: ['gc'] });

  let session: Session | null = null;
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) => {
      if (!session) return reject(new Error('no inspector session'));
      session.post(method, params ?? {}, (error, result) =>
        error ? reject(error) : resolve(result),
      );
    });

  process.on('message', (message: Message) => {
    void (async () => {
      try {
        if (message.type === 'cpu-profile-start') {
          session = new Session();
          session.connect();
          await post('Profiler.enable');
          await post('Profiler.setSamplingInterval', { interval: message.intervalUs ?? 200 });
          await post('Profiler.start');
          process.send?.({ type: 'cpu-profile-started' });
        } else if (message.type === 'gc-stats') {
          process.send?.({ type: 'gc-stats', markCompacts });
        } else if (message.type === 'retention-purge') {
          if (!sweeper) throw new Error('no retention sweeper (BENCH_RETENTION=manual, a worker)');
          const report = await sweeper.runNow();
          process.send?.({ type: 'retention-purged', report });
        } else if (message.type === 'cpu-profile-stop' && session) {
          const { profile } = (await post('Profiler.stop')) as { profile: unknown };
          session.disconnect();
          session = null;
          writeFileSync(message.file, JSON.stringify(profile));
          process.send?.({ type: 'cpu-profile-written', file: message.file });
        }
      } catch (error) {
        process.send?.({ type: 'agent-error', message: String(error) });
      }
    })();
  });
}
