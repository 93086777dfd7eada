import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import {
  AggregatorRegistry,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
} from 'prom-client';

/** What the delivery queue holds now (see Metrics: queried at most every QUEUE_STATS_TTL_MS). */
export interface QueueStats {
  pending: number;
  /** In flight, abandoned: their worker died (its heartbeat stopped) before recording them. */
  stuck: number;
  /** Seconds since the oldest due pending delivery became due; 0 when none is due. */
  oldestDueAgeSeconds: number;
  pausedSubscriptions: number;
  /** Live subscriptions whose TLS client certificate expires within 14 days (or has). */
  expiringClientCertificates: number;
}

/** The IPC message type between an API process of a cluster and the primary (GET /metrics). */
export const CLUSTER_METRICS_MESSAGE = 'tourops:cluster-metrics';

/** A scrape never queries the database more often than this. */
const QUEUE_STATS_TTL_MS = 5_000;

/**
 * The process's Prometheus metrics (GET /metrics, and a separate worker's WORKER_METRICS_PORT).
 * Counters and histograms are fed by the HTTP app's response hook and the worker's events; the
 * queue gauges ask `queueStats`, cached for a few seconds, so scrapes cost the database little.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'tourops_http_request_duration_seconds',
    help: 'HTTP requests by route template and status class.',
    labelNames: ['method', 'route', 'status_class'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'tourops_rate_limit_rejections_total',
    help: 'Requests answered 429, by the limit that refused them (token or ip).',
    labelNames: ['scope'] as const,
    registers: [this.registry],
  });
  readonly rateLimitLocalOnly = new Counter({
    name: 'tourops_rate_limit_local_only_total',
    help:
      'Rate-limit decisions this process made on its own count alone: the shared store (Redis or ' +
      'PostgreSQL) failed or did not answer within its time-out, so the limit was per process.',
    registers: [this.registry],
  });
  readonly idempotentReplays = new Counter({
    name: 'tourops_idempotent_replays_total',
    help: 'Keyed requests answered with the stored answer of an earlier one.',
    registers: [this.registry],
  });
  readonly deliveries = new Counter({
    name: 'tourops_webhook_attempts_total',
    help: 'Delivery attempts by what became of the delivery: success, retry or dead_letter.',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly attemptDuration = new Histogram({
    name: 'tourops_webhook_attempt_duration_seconds',
    help: 'Delivery attempts, from connecting to the end of the answer.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly claimBatch = new Histogram({
    name: 'tourops_webhook_claim_batch_size',
    help: 'Deliveries taken per claim by the worker.',
    buckets: [1, 2, 5, 10, 25, 50, 100, 200, 256],
    registers: [this.registry],
  });
  readonly autoPauses = new Counter({
    name: 'tourops_webhook_auto_pauses_total',
    help: 'Subscriptions paused after a run of 4xx answers.',
    registers: [this.registry],
  });
  readonly deliveryFaults = new Counter({
    name: 'tourops_webhook_delivery_faults_total',
    help:
      'Deliveries whose settlement failed on our side, by stage: record (the outcome could not ' +
      'be written; sent again later) or crash_loop (a crash loop could not be dead-lettered; ' +
      'tried again at the next sweep). Any is a bug to report; the other deliveries go on.',
    labelNames: ['stage'] as const,
    registers: [this.registry],
  });
  readonly retentionDeleted = new Counter({
    name: 'tourops_retention_deleted_rows_total',
    help: 'Rows deleted by the retention purge, by table (a delivery takes its attempts along).',
    labelNames: ['table'] as const,
    registers: [this.registry],
  });
  readonly inFlight = new Gauge({
    name: 'tourops_webhook_attempts_in_flight',
    help: 'Delivery attempts running in this process.',
    registers: [this.registry],
  });

  #stats: { at: number; value: Promise<QueueStats> } | null = null;
  #queueStats: (() => Promise<QueueStats>) | null = null;

  /** The queue's figures, cached like the gauges'; null in a process without a database. */
  queueStats(): Promise<QueueStats> | null {
    return this.#queueStats?.() ?? null;
  }
  /** The labelled request histograms, found once each: prom-client hashes labels on every call. */
  readonly #requestSeries = new Map<string, { observe(value: number): void }>();

  /** One request, on the hot path: a map lookup and an observation. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const statusClass = `${Math.floor(status / 100)}xx`;
    const key = `${method} ${statusClass} ${route}`;
    let series = this.#requestSeries.get(key);
    if (series === undefined) {
      series = this.httpDuration.labels(method, route, statusClass);
      // Bounded by the route table, times methods and classes.
      if (this.#requestSeries.size < 10_000) this.#requestSeries.set(key, series);
    }
    series.observe(seconds);
  }

  constructor(queueStats: (() => Promise<QueueStats>) | null) {
    collectDefaultMetrics({ register: this.registry, prefix: 'tourops_' });
    if (queueStats === null) return;
    const stats = () => {
      const now = Date.now();
      if (this.#stats === null || now - this.#stats.at >= QUEUE_STATS_TTL_MS) {
        const value = queueStats();
        // A failed query is not cached: the next scrape asks again.
        value.catch(() => {
          this.#stats = null;
        });
        this.#stats = { at: now, value };
      }
      return this.#stats.value;
    };
    this.#queueStats = stats;
    const gauge = (name: string, help: string, pick: (s: QueueStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        // The same database answer in every process of a cluster: counted once.
        aggregator: 'first',
        async collect() {
          this.set(pick(await stats()));
        },
      });
    gauge(
      'tourops_webhook_deliveries_pending',
      'Deliveries waiting for an attempt.',
      (s) => s.pending,
    );
    gauge(
      'tourops_webhook_deliveries_stuck',
      'Deliveries in flight past their lease (their worker died or cannot record); others take them over.',
      (s) => s.stuck,
    );
    gauge(
      'tourops_webhook_oldest_due_age_seconds',
      'How long the oldest due delivery has waited; 0 when none is due.',
      (s) => s.oldestDueAgeSeconds,
    );
    gauge(
      'tourops_webhook_subscriptions_paused',
      'Subscriptions paused (auto-paused and not re-enabled).',
      (s) => s.pausedSubscriptions,
    );
    gauge(
      'tourops_webhook_client_certificates_expiring',
      'Live subscriptions whose TLS client certificate expires within 14 days, or has expired.',
      (s) => s.expiringClientCertificates,
    );
  }

  #render: () => Promise<string> = () => this.registry.metrics();

  /** The text exposition of every metric (of every process, in a cluster). */
  render(): Promise<string> {
    return this.#render();
  }

  /**
   * In an API process of `tourops serve --processes N`: /metrics answers for all of them. The
   * primary collects every process's registry (prom-client's AggregatorRegistry: counters and
   * histograms summed, the database gauges, alike in every process, taken once) on request.
   */
  renderInPrimary(): void {
    AggregatorRegistry.setRegistries([this.registry]);
    // Constructing one is what makes prom-client answer the primary's requests in this process.
    new AggregatorRegistry();
    const pending = new Map<number, (reply: { text?: string; error?: string }) => void>();
    let next = 0;
    process.on(
      'message',
      (message: { type?: string; id: number; text?: string; error?: string }) => {
        if (message?.type !== CLUSTER_METRICS_MESSAGE) return;
        pending.get(message.id)?.(message);
        pending.delete(message.id);
      },
    );
    this.#render = () =>
      new Promise<string>((resolve, reject) => {
        const id = next++;
        pending.set(id, (reply) =>
          reply.error === undefined ? resolve(reply.text ?? '') : reject(new Error(reply.error)),
        );
        process.send?.({ type: CLUSTER_METRICS_MESSAGE, id });
      });
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/** HOST values that only this machine can reach. */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

/**
 * Who may read /metrics: with METRICS_TOKEN, whoever sends it as a Bearer token; without, anyone
 * when the service listens on loopback only (a scraper on the same machine), and no one otherwise
 * (404, as if there were no such route). Tokens are compared as digests, in constant time.
 */
export function metricsAccess(token: string | null, host: string) {
  const secret = token === null ? null : sha256(token);
  const open = token === null && isLoopback(host);
  return (authorization: string | undefined): 'ok' | 'unauthorized' | 'hidden' => {
    if (secret === null) return open ? 'ok' : 'hidden';
    const match = /^Bearer +(\S+)$/i.exec(authorization ?? '');
    return match && timingSafeEqual(sha256(match[1]), secret) ? 'ok' : 'unauthorized';
  };
}
