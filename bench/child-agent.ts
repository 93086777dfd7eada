/**
 * Preloaded (`--import`) into every server the benchmark spawns, in front of the unmodified entry
 * point (`src/main.ts` or `bench/reference-server.ts`). It adds two things over the IPC channel:
 *
 * - the server exits as soon as the benchmark process goes away, even if that process was killed
 *   with SIGKILL and could not clean up after itself;
 * - `cpu-profile-start` / `cpu-profile-stop` messages record a V8 CPU profile of exactly the
 *   measurement window (not start-up, not warm-up), written to the file the benchmark names.
 *
 * Without an IPC channel (run by hand) it does nothing.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

type Message =
  | { type: 'cpu-profile-start'; intervalUs?: number }
  | { type: 'cpu-profile-stop'; file: string };

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

if (process.send && process.channel) {
  process.channel.unref();
  process.on('disconnect', () => process.exit(0));

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
        } else if (message.type === 'cpu-profile-stop' && session) {
          const { profile } = (await post('Profiler.stop')) as { profile: unknown };
          session.disconnect();
          session = null;
          writeFileSync(message.file, JSON.stringify(profile));
          process.send?.({ type: 'cpu-profile-written', file: message.file });
        }
      } catch (error) {
        process.send?.({ type: 'cpu-profile-error', message: String(error) });
      }
    })();
  });
}
