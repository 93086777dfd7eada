import { BrokerSender, brokerTlsOptions } from './delivery/broker-sender.ts';
import { WebhookSender } from './delivery/http-sender.ts';
import type { WorkerOptions } from './delivery/types.ts';
import { DEFAULT_MAX_RUNNING, DeliveryWorker } from './delivery/worker.ts';
import { createMailer } from './notifications/mailer.ts';
import type { Runtime } from './runtime.ts';
import { ErasureRunner, type ErasureRunnerOptions } from './services/erasure-runner.ts';
import { RetentionSweeper, type SweeperOptions } from './services/retention-sweeper.ts';

/** A broker connection no attempt used for this long is closed. */
const BROKER_IDLE_MS = 60_000;

/**
 * A delivery worker over the runtime's services, with its own HTTP agent; started. On PostgreSQL it
 * is woken by NOTIFY, so the runtime should LISTEN (`createRuntime(config, { listen: true })`);
 * without it new deliveries wait for the next poll.
 */
export function startWorker(
  runtime: Runtime,
  options: WorkerOptions & { retention?: SweeperOptions; erasures?: ErasureRunnerOptions } = {},
) {
  const { config, services } = runtime;
  const sender = new WebhookSender({
    guard: services.addressGuard,
    timeoutMs: config.webhook.timeoutMs,
    caFile: config.webhook.caFile,
    // As many connections to one origin as attempts may run: the worker's caps decide
    // concurrency, and no attempt waits in the pool behind another subscription's hung one.
    connectionsPerOrigin: options.maxRunning ?? DEFAULT_MAX_RUNNING,
  });
  const brokers = new BrokerSender({
    guard: services.addressGuard,
    timeoutMs: config.webhook.timeoutMs,
    idleMs: BROKER_IDLE_MS,
    tlsOptions: brokerTlsOptions(config.webhook.caFile),
  });
  const mailer = createMailer(config.smtpUrl, { publicBaseUrl: config.publicBaseUrl });
  const { repositories } = runtime;
  const worker = new DeliveryWorker(
    {
      config,
      database: runtime.database,
      queue: runtime.queue,
      subscriptions: repositories.webhooks,
      members: repositories.members,
      notifications: repositories.notifications,
      events: services.events,
      notifier: services.notifier,
      secrets: services.secrets,
      sender,
      brokers,
      transformations: services.transformations,
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
  worker.on('givenBack', () => metrics.inFlight.dec());
  worker.on('paused', () => metrics.autoPauses.inc());
  worker.on('fault', (fault) => metrics.deliveryFaults.labels(fault.stage).inc());
  // The worker also keeps the tables to RETENTION_DAYS.
  const sweeper = new RetentionSweeper(
    { retention: services.retention, logger: runtime.logger },
    options.retention,
  );
  sweeper.on('purged', (report) => {
    for (const table of ['deliveries', 'events', 'notifications'] as const) {
      metrics.retentionDeleted.labels(table).inc(report[table]);
    }
  });
  // And runs the erasures asked for (POST /api/v1/erasures).
  const erasures = new ErasureRunner(
    { erasures: services.erasures, logger: runtime.logger },
    options.erasures,
  );
  worker.start();
  sweeper.start();
  erasures.start();
  return {
    worker,
    sweeper,
    /** Graceful: running attempts finish (within the time-out) and are recorded. */
    async stop() {
      await Promise.all([worker.stop(), sweeper.stop(), erasures.stop()]);
      await Promise.all([sender.close(), brokers.close()]);
      mailer?.close();
    },
  };
}
