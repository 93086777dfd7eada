import { createMailer } from '../notifications/mailer.ts';
import type { Runtime } from '../runtime.ts';
import { WebhookSender } from './http-sender.ts';
import { DEFAULT_MAX_IN_FLIGHT, DeliveryWorker, type WorkerOptions } from './worker.ts';

/**
 * A delivery worker over the runtime's services, with its own HTTP agent; started. On PostgreSQL it
 * is woken by NOTIFY, so the runtime should LISTEN (`createRuntime(config, { listen: true })`);
 * without it new deliveries wait for the next poll.
 */
export function startWorker(runtime: Runtime, options: WorkerOptions = {}) {
  const { config, services } = runtime;
  const sender = new WebhookSender({
    guard: services.addressGuard,
    timeoutMs: config.webhook.timeoutMs,
    caFile: config.webhook.caFile,
    // As many connections to one origin as attempts may run: the worker's caps decide
    // concurrency, and no attempt waits in the pool behind another subscription's hung one.
    connectionsPerOrigin: options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
  });
  const mailer = createMailer(config.smtpUrl, { publicBaseUrl: config.publicBaseUrl });
  const worker = new DeliveryWorker(
    {
      config,
      deliveries: services.deliveries,
      notifier: services.notifier,
      secrets: services.secrets,
      sender,
      clock: runtime.clock,
      logger: runtime.logger,
      mailer,
    },
    options,
  );
  // The metrics follow the worker's own events.
  const { metrics } = runtime;
  worker.on('claimed', (claimed) => {
    metrics.claimBatch.observe(claimed.length);
    metrics.inFlight.inc(claimed.length);
  });
  worker.on('attempted', (settled) => {
    metrics.inFlight.dec();
    const outcome = settled.outcome.status === 'pending' ? 'retry' : settled.outcome.status;
    metrics.deliveries.labels(outcome).inc();
    metrics.attemptDuration.observe(settled.attempt.durationMs / 1000);
  });
  worker.on('paused', () => metrics.autoPauses.inc());
  worker.start();
  return {
    worker,
    /** Graceful: running attempts finish (within the time-out) and are recorded. */
    async stop() {
      await worker.stop();
      await sender.close();
      mailer?.close();
    },
  };
}
