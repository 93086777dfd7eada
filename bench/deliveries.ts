/**
 * The delivery rows of `npm run bench`: webhook deliveries to a local HTTPS receiver (this
 * process, its own CA), made by one API process with its worker (`src/main.ts`, what `npm start`
 * runs), on SQLite and on PostgreSQL.
 *
 * - Throughput: a backlog of `events` events (through the service layer, in this process) for four
 *   subscriptions is written while no worker runs; then the API process starts and its worker
 *   works it off. Deliveries per second are counted at the receiver over the steady part (the 5th to
 *   the 95th percentile of arrivals), so start-up and the tail are not counted.
 * - Ed25519: the plain backlog run with every endpoint on Standard Webhooks and asymmetric signatures, so
 *   each delivery is signed twice more (HMAC `v1` over the Standard Webhooks text, Ed25519 `v1a`).
 * - Brokers: the plain backlog run with the four subscriptions' URLs pointed at RabbitMQ (one exchange,
 *   one queue per subscription, consumed here) or NATS JetStream (one stream per subscription, its
 *   subject subscribed to here); arrivals are counted as messages reach this process, once each
 *   publish was confirmed or acknowledged by the broker.
 * - A timing-out endpoint: the same, with a fifth subscription whose receiver never answers
 *   (every attempt runs into WEBHOOK_TIMEOUT_MS); the row is the other four's deliveries/s.
 * - The ceiling: bare undici `request()` POSTs from a child process (bench/raw-sender.ts) to the
 *   same receiver, the same number, at the worker's concurrency.
 * - Push back: one subscription of another tenant whose endpoint answers 200 after PUSHBACK_MS, or
 *   503 at once to any request beyond PUSHBACK_CAPACITY at a time; deliveries/s against what that
 *   capacity allows, and the share of attempts refused (the adaptive concurrency limit's cost).
 * - Latency: with the worker idle, clients created through the admin API at a light, steady rate;
 *   each delivery's time from sending the admin request (which commits the event) to its first
 *   byte at the receiver.
 *
 * The three throughput runs are interleaved round by round, like the HTTP rows.
 */

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { connect as amqpConnect, type ChannelModel } from 'amqplib';
import { sql } from 'kysely';
import { type NatsConnection, connect as natsConnect } from 'nats';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import type { EventData } from '../src/domain/event-schemas.ts';
import { newId } from '../src/lib/ids.ts';
import { createRuntime, type Runtime } from '../src/runtime.ts';
import { testCa } from '../test/helpers/https-receiver.ts';
import { median, percentile } from './measure.ts';
import { REPO_ROOT, type ServerProcess, startServer } from './processes.ts';
import { type CpuProfile, formatProfileSummary, summarizeProfile } from './profile.ts';

export interface DeliveryBenchOptions {
  backend: string;
  /** DATA_DIR, or DATABASE_URL + SECRET_KEY + DATA_DIR, of an empty database. */
  dbEnv: Record<string, string>;
  /** Events per throughput run; each is delivered to HEALTHY subscriptions. */
  events: number;
  rounds: number;
  logLevel: string;
  log(message: string): void;
  /** A directory to write a CPU profile of the first plain backlog run to (its summary is returned). */
  profileDir: string | null;
  /** Registers a started server so the benchmark stops it however it ends. */
  track(server: ServerProcess, running: boolean): void;
}

interface Rate {
  /** Deliveries (or POSTs) per second over the steady part, each run. */
  runs: number[];
  /** Median over the runs. */
  perSec: number;
  /**
   * CPU per delivery, µs: of the API process (null where /proc is missing), or, for the ceiling,
   * of the bare sender per POST.
   */
  cpuUsPerDelivery: number | null;
}

export interface DeliveryResult {
  backend: string;
  deliveriesPerRun: number;
  ceiling: Rate;
  plain: Rate;
  withTimeouts: Rate;
  /** The plain backlog run by `tourops serve --processes auto`. */
  processes: Rate;
  /** The plain backlog run, each delivery also signed `v1` (Standard Webhooks) and `v1a` (Ed25519). */
  ed25519: Rate;
  /** The plain backlog run into RabbitMQ (publisher confirms), and into NATS JetStream (stream acks). */
  rabbitmq: Rate;
  nats: Rate;
  /** The plain backlog run, each delivery through a trivial transformation (one header added). */
  transformed: Rate;
  /**
   * The plain backlog run while another tenant's subscription retries deliveries whose
   * transformation runs to its time cap every run (HOSTILE_EVENTS of them, a wait of 1 s).
   */
  besideHostile: Rate;
  /** That subscription's failed runs during the besideHostile runs. */
  hostileRuns: number;
  latency: { p50: number; p90: number; p99: number; max: number; samples: number; perSec: number };
  timeoutMs: number;
  /** The endpoint that answers 503 above PUSHBACK_CAPACITY requests at once. */
  pushback: { perSec: number; ideal: number; wasted: number; deliveries: number };
  /** Summary of the API process's CPU profile during the first plain backlog run (--profile). */
  profile: string | null;
}

const HEALTHY = 4;
/** The hostile tenant's deliveries in the besideHostile scenario, each retried every second. */
const HOSTILE_EVENTS = 64;
/** What the transformed scenario runs: as little as a transformation does. */
const TRIVIAL_TRANSFORMATION =
  "function handler(webhook) { webhook.headers['x-bench'] = '1'; return webhook; }";
/** What the hostile tenant's runs do: loop until the sandbox's time cap ends them. */
const HOSTILE_TRANSFORMATION = 'function handler(webhook) { for (;;) {} }';
export const PUSHBACK_CAPACITY = 4;
export const PUSHBACK_MS = 10;
const PUSHBACK_EVENTS = 2_000;
const LATENCY_EVENTS_PER_SEC = 20;
const LATENCY_SECONDS = 5;
/** The worker's default maxRunning: the raw sender runs as many requests at once. */
const CONCURRENCY = 256;
const EMIT_BATCH = 500;
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';

const now = () => performance.now();

/** Arrivals per second between the 5th and the 95th percentile arrival. */
export function steadyRate(arrivals: number[]): number {
  const sorted = [...arrivals].sort((a, b) => a - b);
  const first = Math.floor(sorted.length * 0.05);
  const last = Math.ceil(sorted.length * 0.95) - 1;
  if (last <= first) return Number.NaN;
  return ((last - first) / (sorted[last] - sorted[first])) * 1000;
}

/** Where a backlog run's deliveries are counted: the HTTPS receiver, or a broker's consumers here. */
export class Arrivals {
  /** Arrival times (performance.now()) this run. */
  arrivals: number[] = [];
  private onArrival: (() => void) | null = null;

  constructor(private readonly name: string) {}

  arrived(at = now()): void {
    this.arrivals.push(at);
    this.onArrival?.();
  }

  reset(): void {
    this.arrivals = [];
  }

  /** Resolves when `count` have arrived this run (one waiter at a time). */
  waitFor(count: number, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.onArrival = null;
        reject(new Error(`${this.name}: ${this.arrivals.length} of ${count} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.onArrival = () => {
        if (this.arrivals.length < count) return;
        clearTimeout(timer);
        this.onArrival = null;
        resolve();
      };
      this.onArrival();
    });
  }
}

/** An HTTPS endpoint that answers 200 at once, or (`hang`) never answers. */
export class Receiver extends Arrivals {
  /** Event bodies by arrival, while `keepBodies` is on (latency run). */
  bodies: Array<{ at: number; body: string }> = [];
  keepBodies = false;
  hung = 0;
  private readonly hanging = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {
    super('receiver');
  }

  static async start(key: string, cert: string, hang = false): Promise<Receiver> {
    let receiver: Receiver | null = null;
    const server = createServer({ key, cert, keepAliveTimeout: 30_000 }, (req, res) => {
      // 'request' fires once the headers are in: the delivery's first bytes.
      const at = now();
      const self = receiver as Receiver;
      if (hang) {
        self.hung += 1;
        self.hanging.add(req.socket);
        req.resume();
        return;
      }
      self.arrived(at);
      if (self.keepBodies) {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          self.bodies.push({ at, body: Buffer.concat(chunks).toString('utf8') });
          res.writeHead(200).end();
        });
      } else {
        req.resume();
        req.on('end', () => res.writeHead(200).end());
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    receiver = new Receiver(server, address.port);
    return receiver;
  }

  url(path: string): string {
    return `https://127.0.0.1:${this.port}${path}`;
  }

  override reset(): void {
    super.reset();
    this.bodies = [];
    this.hung = 0;
  }

  /** Ends the connections of unanswered requests, so the worker's attempts end now. */
  dropHung(): void {
    for (const socket of this.hanging) socket.destroy();
    this.hanging.clear();
  }

  close(): Promise<void> {
    this.dropHung();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const BENCH_EXCHANGE = 'tourops-bench';

/**
 * The machine's RabbitMQ (127.0.0.1:5672): an exchange with a queue per subscription, consumed
 * here without acks. `urls` are the subscriptions' destinations.
 */
export async function rabbitSink(count: number) {
  const model: ChannelModel = await amqpConnect('amqp://guest:guest@127.0.0.1:5672');
  const channel = await model.createChannel();
  await channel.assertExchange(BENCH_EXCHANGE, 'direct', { autoDelete: true });
  const sink = new Arrivals('broker sink');
  const urls: string[] = [];
  for (let i = 1; i <= count; i++) {
    const { queue } = await channel.assertQueue('', { exclusive: true });
    await channel.bindQueue(queue, BENCH_EXCHANGE, `sub-${i}`);
    await channel.consume(queue, () => sink.arrived(), { noAck: true });
    urls.push(`amqp://guest:guest@127.0.0.1:5672/?exchange=${BENCH_EXCHANGE}&routingKey=sub-${i}`);
  }
  return { sink, urls, close: () => model.close() };
}

/**
 * The machine's NATS with JetStream (127.0.0.1:4222): a stream per subscription (an event goes to
 * each with the same Nats-Msg-Id, which one stream would store once), its subject subscribed to
 * here. `purge` empties the streams between runs.
 */
export async function natsSink(count: number) {
  const connection: NatsConnection = await natsConnect({ servers: '127.0.0.1:4222' });
  const manager = await connection.jetstreamManager();
  const sink = new Arrivals('broker sink');
  const urls: string[] = [];
  const streams: string[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `TOUROPS_BENCH_${i}`;
    const subject = `tourops.bench.${i}`;
    await manager.streams.delete(name).catch(() => undefined);
    await manager.streams.add({ name, subjects: [subject] });
    streams.push(name);
    connection.subscribe(subject, { callback: () => sink.arrived() });
    urls.push(`nats://127.0.0.1:4222?subject=${subject}`);
  }
  return {
    sink,
    urls,
    purge: async () => {
      for (const name of streams) await manager.streams.purge(name);
    },
    close: async () => {
      for (const name of streams) await manager.streams.delete(name).catch(() => undefined);
      await connection.close();
    },
  };
}

/** An HTTPS endpoint that serves PUSHBACK_CAPACITY requests at a time and refuses the rest. */
class LimitedReceiver {
  /** Arrival times of the requests it served. */
  served: number[] = [];
  refused = 0;
  private open = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(key: string, cert: string): Promise<LimitedReceiver> {
    let receiver: LimitedReceiver | null = null;
    const server = createServer({ key, cert, keepAliveTimeout: 30_000 }, (req, res) => {
      const self = receiver as LimitedReceiver;
      req.resume();
      if (self.open >= PUSHBACK_CAPACITY) {
        self.refused += 1;
        req.on('end', () => res.writeHead(503).end());
        return;
      }
      self.open += 1;
      req.on('end', () =>
        setTimeout(() => {
          self.open -= 1;
          self.served.push(now());
          res.writeHead(200).end();
        }, PUSHBACK_MS),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    receiver = new LimitedReceiver(server, address.port);
    return receiver;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * PUSHBACK_EVENTS deliveries to one endpoint that serves PUSHBACK_CAPACITY at a time, worked off by
 * one API process whose retries come a second apart (so refused ones come back within the run).
 */
async function pushbackRun(
  runtime: Runtime,
  serverEnv: Record<string, string>,
  ca: { key: string; cert: string },
  options: DeliveryBenchOptions,
): Promise<DeliveryResult['pushback']> {
  const receiver = await LimitedReceiver.start(ca.key, ca.cert);
  try {
    const tenant = await runtime.services.tenants.create({
      name: 'Bench Push Back',
      slug: 'bench-pushback',
      tier: 'enterprise',
    });
    await runtime.services.webhooks.create(tenant.id, {
      url: `https://127.0.0.1:${receiver.port}/limited`,
      events: ['client.created'],
    });
    await emitBacklog(runtime, tenant.id, PUSHBACK_EVENTS);
    const server = await startServer({
      name: `api-${options.backend}-pushback`,
      entry: 'src/main.ts',
      env: { ...serverEnv, WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s' },
    });
    options.track(server, true);
    try {
      const deadline = now() + 120_000;
      while (receiver.served.length < PUSHBACK_EVENTS) {
        if (now() > deadline) {
          throw new Error(`push back: ${receiver.served.length} of ${PUSHBACK_EVENTS} served`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await server.stop();
      options.track(server, false);
    }
    const perSec = steadyRate(receiver.served);
    const result = {
      perSec,
      ideal: (PUSHBACK_CAPACITY * 1000) / PUSHBACK_MS,
      wasted: receiver.refused / (receiver.refused + receiver.served.length),
      deliveries: PUSHBACK_EVENTS,
    };
    options.log(
      `${options.backend} deliveries: push back ${Math.round(perSec)}/s, ` +
        `${(result.wasted * 100).toFixed(1)}% of attempts refused`,
    );
    return result;
  } finally {
    await receiver.close();
  }
}

export async function benchDeliveries(options: DeliveryBenchOptions): Promise<DeliveryResult> {
  const { backend, log } = options;
  const ca = await testCa();
  const receiver = await Receiver.start(ca.key, ca.cert);
  // Its own origin, as a customer's broken endpoint would be.
  const blackHole = await Receiver.start(ca.key, ca.cert, true);
  const serverEnv = webhookServerEnv(options.dbEnv, options.logLevel, ca.caFile);
  const config = loadConfig({ ...serverEnv, LOG_LEVEL: 'silent' });
  const runtime = await createRuntime(config, { logger: pino({ level: 'silent' }) });
  try {
    const { services } = runtime;
    const tenant = await services.tenants.create({
      name: 'Bench Deliveries',
      slug: 'bench-deliveries',
      tier: 'enterprise',
    });
    const healthyPaths = Array.from({ length: HEALTHY }, (_, i) => `/ok/${i + 1}`);
    const healthy: string[] = [];
    for (const path of healthyPaths) {
      const created = await services.webhooks.create(tenant.id, {
        url: receiver.url(path),
        events: ['client.created'],
      });
      healthy.push(created.subscription.id);
    }
    /** The ed25519 scenario: every healthy endpoint signs v1 (HMAC) and v1a (Ed25519) too. */
    const setAsymmetric = async (on: boolean) => {
      for (const id of healthy) {
        await services.webhooks.update(tenant.id, id, {
          standardWebhooks: on,
          asymmetricSignatures: on,
        });
      }
    };
    // The brokers' scenarios point the same four subscriptions at the machine's brokers.
    const rabbit = await rabbitSink(HEALTHY);
    const nats = await natsSink(HEALTHY);
    const httpsUrls = healthyPaths.map((path) => receiver.url(path));
    const setDestinations = async (urls: string[]) => {
      for (const [i, id] of healthy.entries()) {
        await services.webhooks.update(tenant.id, id, { url: urls[i] });
      }
    };
    const sinks = { rabbitmq: rabbit.sink, nats: nats.sink } as const;
    const { subscription: timingOut } = await services.webhooks.create(tenant.id, {
      url: blackHole.url('/hook'),
      events: ['client.created'],
    });
    const setTimingOut = (active: boolean) =>
      runtime.repositories.webhooks.updateSubscription(tenant.id, timingOut.id, { active });
    const setTransformation = async (code: string | null) => {
      for (const id of healthy) {
        await services.webhooks.update(tenant.id, id, {
          transformation: code === null ? null : { code },
        });
      }
    };
    // Another tenant, whose subscription's every run loops to the cap; active in its scenario.
    const hostileTenant = await services.tenants.create({
      name: 'Bench Hostile',
      slug: 'bench-hostile',
      tier: 'enterprise',
    });
    const { subscription: hostile } = await services.webhooks.create(hostileTenant.id, {
      url: receiver.url('/hostile'),
      events: ['client.created'],
      transformation: { code: HOSTILE_TRANSFORMATION },
      retrySchedule: Array(10).fill('1s'),
    });
    const setHostile = (active: boolean) =>
      runtime.repositories.webhooks.updateSubscription(hostileTenant.id, hostile.id, { active });
    let hostileRuns = 0;

    const expected = options.events * HEALTHY;
    const runs = {
      ceiling: [] as number[],
      plain: [] as number[],
      withTimeouts: [] as number[],
      processes: [] as number[],
      ed25519: [] as number[],
      rabbitmq: [] as number[],
      nats: [] as number[],
      transformed: [] as number[],
      besideHostile: [] as number[],
    };
    const cpu = {
      ceiling: [] as number[],
      plain: [] as number[],
      withTimeouts: [] as number[],
      processes: [] as number[],
      ed25519: [] as number[],
      rabbitmq: [] as number[],
      nats: [] as number[],
      transformed: [] as number[],
      besideHostile: [] as number[],
    };
    const bodyBytes = deliveredBodyBytes(options.events);
    let profile: string | null = null;

    /** Bare undici from a child process; the receiver's steady rate. */
    const rawRun = async (count: number, cpuUs: number[] = []): Promise<number> => {
      receiver.reset();
      const urls = healthyPaths.map((p) => receiver.url(p));
      const measured = await runRawSender(urls, count, bodyBytes, ca.caFile);
      if (measured !== undefined) cpuUs.push(measured.cpuUs);
      return steadyRate(receiver.arrivals);
    };
    // Warms the receiver (JIT, TLS session code) before anything is counted.
    await rawRun(Math.min(expected, 5_000));

    for (let round = 1; round <= options.rounds; round++) {
      const started = now();
      runs.ceiling.push(await rawRun(expected, cpu.ceiling));
      log(
        `${backend} deliveries round ${round}: ceiling ${Math.round(runs.ceiling.at(-1) ?? 0)}/s ` +
          `(${expected} POSTs in ${((now() - started) / 1000).toFixed(1)} s)`,
      );

      for (const scenario of [
        'plain',
        'withTimeouts',
        'processes',
        'ed25519',
        'rabbitmq',
        'nats',
        'transformed',
        'besideHostile',
      ] as const) {
        await runtime.database.db.deleteFrom('webhookDeliveries').execute();
        // Every run starts from the same table: without this, PostgreSQL's dead rows and stale
        // statistics from the runs before (autovacuum lags behind 20,000 deletes a minute) slow
        // whichever scenario comes later, and an interleaved comparison measures the order.
        if (runtime.database.dialect === 'postgres') {
          await sql`vacuum analyze webhook_deliveries`.execute(runtime.database.db);
        }
        await setTimingOut(scenario === 'withTimeouts');
        await setAsymmetric(scenario === 'ed25519');
        await setTransformation(scenario === 'transformed' ? TRIVIAL_TRANSFORMATION : null);
        await setHostile(scenario === 'besideHostile');
        await setDestinations(
          scenario === 'rabbitmq' ? rabbit.urls : scenario === 'nats' ? nats.urls : httpsUrls,
        );
        if (scenario === 'nats') await nats.purge();
        const sink: Arrivals =
          scenario === 'rabbitmq' || scenario === 'nats' ? sinks[scenario] : receiver;
        sink.reset();
        // The hostile tenant's deliveries first: due from the start, retried through the run.
        if (scenario === 'besideHostile') {
          await emitBacklog(runtime, hostileTenant.id, HOSTILE_EVENTS);
        }
        const written = now();
        await emitBacklog(runtime, tenant.id, options.events);
        const writeSec = (now() - written) / 1000;
        receiver.reset();
        blackHole.reset();
        // All cores: the same backlog run by `tourops serve --processes auto`.
        const server = await startServer({
          name: `api-${backend}-deliveries-${scenario}`,
          ...(scenario === 'processes'
            ? { entry: 'bin/tourops.js', args: ['serve', '--processes', 'auto'] }
            : { entry: 'src/main.ts' }),
          env: serverEnv,
        });
        options.track(server, true);
        const profileThis = options.profileDir !== null && round === 1 && scenario === 'plain';
        if (profileThis) await server.startCpuProfile();
        try {
          // The worker may have started before the server answered its health check: CPU is
          // counted from here, over the deliveries that arrive from here.
          const arrivedBefore = sink.arrivals.length;
          const cpuBefore = server.cpuSeconds();
          await sink.waitFor(expected, Math.max(60_000, expected * 5));
          const cpuAfter = server.cpuSeconds();
          const counted = expected - arrivedBefore;
          if (cpuBefore !== null && cpuAfter !== null && counted >= expected / 2) {
            cpu[scenario].push(((cpuAfter - cpuBefore) * 1e6) / counted);
          }
          const rate = steadyRate(sink.arrivals);
          runs[scenario].push(rate);
          if (scenario === 'besideHostile') {
            const failed = await runtime.database.db
              .selectFrom('webhookAttempts as a')
              .innerJoin('webhookDeliveries as d', 'd.id', 'a.deliveryId')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('d.subscriptionId', '=', hostile.id)
              .where('a.errorClass', '=', 'transformation_failed')
              .executeTakeFirstOrThrow();
            hostileRuns += Number(failed.n);
          }
          log(
            `${backend} deliveries round ${round}: ${scenario} ${Math.round(rate)}/s ` +
              `(backlog of ${expected} written in ${writeSec.toFixed(1)} s` +
              `${scenario === 'withTimeouts' ? `; ${blackHole.hung} attempts left hanging` : ''})`,
          );
          if (profileThis && options.profileDir) {
            const file = join(options.profileDir, `deliveries-${backend}.cpuprofile`);
            await server.stopCpuProfile(file);
            profile = formatProfileSummary(
              `webhook backlog run (${backend})`,
              summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile),
              expected,
            );
          }
        } finally {
          blackHole.dropHung();
          await server.stop();
          options.track(server, false);
        }
      }
    }

    await setDestinations(httpsUrls);
    await setTransformation(null);
    await setHostile(false);
    await rabbit.close();
    await nats.close();
    const pushback = await pushbackRun(runtime, serverEnv, ca, options);

    // Latency at light load: events through the admin API while the worker idles.
    await runtime.database.db.deleteFrom('webhookDeliveries').execute();
    if (runtime.database.dialect === 'postgres') {
      await sql`vacuum analyze webhook_deliveries`.execute(runtime.database.db);
    }
    await setTimingOut(false);
    receiver.reset();
    receiver.keepBodies = true;
    const server = await startServer({
      name: `api-${backend}-latency`,
      entry: 'src/main.ts',
      env: serverEnv,
    });
    options.track(server, true);
    const sentAt = new Map<string, number>();
    const total = LATENCY_EVENTS_PER_SEC * LATENCY_SECONDS;
    try {
      const interval = 1000 / LATENCY_EVENTS_PER_SEC;
      const begin = now();
      for (let i = 0; i < total; i++) {
        const due = begin + i * interval;
        if (due > now()) await new Promise((resolve) => setTimeout(resolve, due - now()));
        const sent = now();
        const response = await fetch(`${server.baseUrl}/admin/v1/tenants/${tenant.id}/clients`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'individual', displayName: `Latency ${i}` }),
        });
        const created = (await response.json()) as { data?: { id: string } };
        if (response.status !== 201 || !created.data) {
          throw new Error(`admin client create answered ${response.status}`);
        }
        sentAt.set(created.data.id, sent);
      }
      await receiver.waitFor(total * HEALTHY, 30_000);
      // Bodies are complete shortly after their first bytes.
      const deadline = now() + 5_000;
      while (receiver.bodies.length < total * HEALTHY && now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      receiver.keepBodies = false;
      await server.stop();
      options.track(server, false);
    }
    const latencies = receiver.bodies
      .map(({ at, body }) => {
        const clientId = (JSON.parse(body) as { data: { clientId: string } }).data.clientId;
        const sent = sentAt.get(clientId);
        return sent === undefined ? Number.NaN : at - sent;
      })
      .filter(Number.isFinite)
      .sort((a, b) => a - b);
    log(
      `${backend} deliveries: latency p50 ${percentile(latencies, 50).toFixed(1)} ms, ` +
        `p99 ${percentile(latencies, 99).toFixed(1)} ms over ${latencies.length} deliveries`,
    );

    const rate = (values: number[], cpuValues: number[] | null): Rate => ({
      runs: values,
      perSec: median(values),
      cpuUsPerDelivery: cpuValues && cpuValues.length > 0 ? median(cpuValues) : null,
    });
    return {
      backend,
      deliveriesPerRun: expected,
      ceiling: rate(runs.ceiling, cpu.ceiling),
      plain: rate(runs.plain, cpu.plain),
      withTimeouts: rate(runs.withTimeouts, cpu.withTimeouts),
      processes: rate(runs.processes, cpu.processes),
      ed25519: rate(runs.ed25519, cpu.ed25519),
      rabbitmq: rate(runs.rabbitmq, cpu.rabbitmq),
      nats: rate(runs.nats, cpu.nats),
      transformed: rate(runs.transformed, cpu.transformed),
      besideHostile: rate(runs.besideHostile, cpu.besideHostile),
      hostileRuns,
      pushback,
      latency: {
        p50: percentile(latencies, 50),
        p90: percentile(latencies, 90),
        p99: percentile(latencies, 99),
        max: latencies.at(-1) ?? Number.NaN,
        samples: latencies.length,
        perSec: LATENCY_EVENTS_PER_SEC * HEALTHY,
      },
      timeoutMs: config.webhook.timeoutMs,
      profile,
    };
  } finally {
    await runtime.close();
    await receiver.close();
    await blackHole.close();
  }
}

/** The size of a delivered body (see worker.ts) of a backlog of `events`, for bare POSTs. */
export function deliveredBodyBytes(events: number): number {
  return JSON.stringify({
    id: randomUUID(),
    type: 'client.created',
    created: 1_700_000_000,
    data: backlogEvent(events),
  }).length;
}

/**
 * Bare undici POSTs from a child process (bench/raw-sender.ts): `count` of them over `urls`,
 * `concurrency` at a time (default: the worker's ceiling), `bodyBytes` each. Returns its CPU µs a
 * POST after `warm` of them (by default once its connections are open; see raw-sender.ts) and
 * where it went (cpuSplitWords), when it measured one.
 */
export async function runRawSender(
  urls: readonly string[],
  count: number,
  bodyBytes: number,
  caFile: string,
  concurrency = CONCURRENCY,
  warm?: number,
): Promise<{ cpuUs: number; split: string } | undefined> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/raw-sender.ts'], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      BENCH_RAW_URLS: urls.join(','),
      BENCH_RAW_COUNT: String(count),
      BENCH_RAW_CONCURRENCY: String(concurrency),
      BENCH_RAW_CA: caFile,
      BENCH_RAW_BODY_BYTES: String(bodyBytes),
      ...(warm === undefined ? {} : { BENCH_RAW_WARM: String(warm) }),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  const raw = JSON.parse(out || '{}') as {
    sent?: number;
    failed?: number;
    cpuUsPerPost?: number;
    split?: string;
  };
  if (code !== 0 || raw.failed !== 0) throw new Error(`raw sender failed: ${code} ${out}`);
  return raw.cpuUsPerPost === undefined
    ? undefined
    : { cpuUs: raw.cpuUsPerPost, split: raw.split ?? '' };
}

/**
 * A client.created event's data as the product emits it (see ClientsService.create): the members,
 * the client as its GET shows it, no changes.
 */
export function backlogEvent(
  index: number,
  kind: 'individual' | 'company' = 'individual',
  name = 'Backlog client',
): EventData<'client.created'> {
  const at = new Date().toISOString();
  const object = {
    id: newId('cli'),
    kind,
    displayName: `${name} ${index}`,
    legalName: null,
    email: null,
    phone: null,
    countryIso: null,
    language: null,
    currency: null,
    vatId: null,
    tags: [],
    notes: null,
    archivedAt: null,
    createdAt: at,
    updatedAt: at,
  };
  return { clientId: object.id, kind, displayName: object.displayName, object, changes: {} };
}

/** A runtime in this process on `dbEnv`, logging nothing: the emit rows' (no worker runs). */
export async function silentRuntime(dbEnv: Record<string, string>): Promise<Runtime> {
  const ca = await testCa();
  const config = loadConfig({
    ...webhookServerEnv(dbEnv, 'silent', ca.caFile),
    LOG_LEVEL: 'silent',
  });
  return createRuntime(config, { logger: pino({ level: 'silent' }) });
}

/** The environment of an API or worker process delivering to this process's receivers. */
export function webhookServerEnv(
  dbEnv: Record<string, string>,
  logLevel: string,
  caFile: string,
): Record<string, string> {
  return {
    ...dbEnv,
    ADMIN_API_TOKEN: ADMIN_TOKEN,
    LOG_LEVEL: logLevel,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: caFile,
  };
}

/** `count` client.created events through the events service, EMIT_BATCH per transaction. */
export async function emitBacklog(
  runtime: Runtime,
  tenantId: string,
  count: number,
): Promise<void> {
  const { database, services } = runtime;
  for (let done = 0; done < count; done += EMIT_BATCH) {
    await database.withTransaction(async () => {
      for (let i = done; i < Math.min(count, done + EMIT_BATCH); i++) {
        await services.events.emit(tenantId, 'client.created', backlogEvent(i));
      }
    });
  }
}
