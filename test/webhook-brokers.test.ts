import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { DiscardPolicy } from 'nats';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { BrokerSender, brokerTlsOptions } from '../src/delivery/broker-sender.ts';
import { AddressGuard } from '../src/domain/address-guard.ts';
import { startWorker } from '../src/start-worker.ts';
import { startTracing } from '../src/tracing-sdk.ts';
import { attemptLog, createdWithin, mostWithin } from './helpers/attempt-log.ts';
import {
  BrokerProxy,
  NATS_PORT,
  NatsStream,
  RABBIT_PORT,
  RabbitQueue,
  rabbitUser,
  startTlsNats,
} from './helpers/brokers.ts';
import { reaped } from './helpers/children.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import {
  createClient,
  createSubscription,
  createTenant,
  type TenantFixture,
} from './helpers/fixtures.ts';
import { HttpsReceiver, testCa } from './helpers/https-receiver.ts';
import { outputOf, ROOT, untilOutput } from './helpers/processes.ts';
import { eventually, HUNG_AFTER_MS, until } from './helpers/until.ts';

// Broker destinations against the machine's RabbitMQ and NATS JetStream (test/helpers/brokers.ts
// fails the suite, naming the start command, when one is down).

const stripe = new Stripe('sk_test_x');
const exporter = new InMemorySpanExporter();
const sdk = startTracing({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
after(() => sdk.shutdown());

interface Attempt {
  attempt: number;
  status: number | null;
  errorClass: string | null;
  responseBody: string;
}

/** A consumer snippet of docs/snippets, run as a reader would run it, until it consumes. */
async function startConsumer(file: string, env: Record<string, string>) {
  const child = reaped(
    spawn(process.execPath, [`docs/snippets/${file}`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  const output = outputOf(child);
  await untilOutput(child, output, 'consuming');
  return {
    output,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
    },
  };
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A broker that accepts connections and never says a word. */
async function frozenBroker(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

for (const backend of BACKENDS) {
  describe(`broker destinations: RabbitMQ and NATS JetStream (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let rabbit: RabbitQueue;
    let stream: NatsStream;
    let user: Awaited<ReturnType<typeof rabbitUser>>;
    const logLines: string[] = [];
    const natsPassword = `nats-pw-${Math.random().toString(36).slice(2)}`;

    before(async () => {
      rabbit = await RabbitQueue.open();
      stream = await NatsStream.open();
      user = await rabbitUser();
      const logStream = new Writable({
        write(chunk, _encoding, done) {
          logLines.push(String(chunk));
          done();
        },
      });
      ctx = await createWebhookTestContext(
        backend,
        {
          WEBHOOK_RETRY_SCHEDULE: '20ms,20ms,20ms',
          WEBHOOK_TIMEOUT_MS: '1500',
          // A broker's refusal pauses like a 4xx: after three in a row here.
          WEBHOOK_AUTOPAUSE_FAILURES: '3',
          WEBHOOK_AUTOPAUSE_WINDOW: '0s',
        },
        { logger: pino({ level: 'debug' }, logStream) },
      );
      tenant = await createTenant(ctx, { tier: 'pro' });
      receiver = await HttpsReceiver.start({ responder: () => ({ status: 204 }) });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 20 });
    });
    after(async () => {
      await worker?.stop();
      await receiver?.close();
      await ctx?.close();
      await rabbit?.close();
      await stream?.close();
      await user?.remove();
    });

    const amqpUrl = (exchange = rabbit.exchange, password = user.password, port = RABBIT_PORT) =>
      `amqp://${user.username}:${password}@127.0.0.1:${port}/?exchange=${exchange}&routingKey=${rabbit.routingKey}`;
    const natsUrl = (subject = stream.subject, port = NATS_PORT) =>
      `nats://tourops:${natsPassword}@127.0.0.1:${port}?subject=${subject}`;
    const attemptsOf = async (subscriptionId: string) => {
      const deliveries = await ctx.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries`, {
        token: tenant.token,
      });
      const attempts: Attempt[] = [];
      for (const delivery of deliveries.json().data as Array<{ id: string }>) {
        const page = await ctx.api(
          'GET',
          `/api/v1/webhooks/${subscriptionId}/deliveries/${delivery.id}/attempts`,
          { token: tenant.token },
        );
        attempts.push(...(page.json().data as Attempt[]));
      }
      return attempts.sort((a, b) => a.attempt - b.attempt);
    };
    /** The portal's pages as the tenant's browser gets them. */
    const portalPages = async (paths: string[]) => {
      const link = await ctx.api('POST', '/api/v1/portal/sessions', { token: tenant.token });
      const path = new URL(link.json().data.url).pathname;
      const page = await ctx.app.inject({ method: 'GET', url: path });
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
      const cookiesOf = (response: typeof page) =>
        (response.cookies as Array<{ name: string; value: string }>)
          .map((c) => `${c.name}=${c.value}`)
          .join('; ');
      const signedIn = await ctx.app.inject({
        method: 'POST',
        url: path,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          cookie: cookiesOf(page),
        },
        payload: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      const cookie = cookiesOf(signedIn);
      const pages = [];
      for (const url of paths) {
        const shown = await ctx.app.inject({ method: 'GET', url, headers: { cookie } });
        assert.equal(shown.statusCode, 200, url);
        pages.push(shown);
      }
      return pages;
    };
    const unsubscribe = (id: string) =>
      ctx.api('DELETE', `/api/v1/webhooks/${id}`, { token: tenant.token });

    it('a client.created reaches a bound queue and a stream: the same body, the event id as message id, signatures that verify', async () => {
      const https = await createSubscription(ctx, tenant, receiver.url('/same-body'), {
        standardWebhooks: true,
      });
      const amqp = await createSubscription(ctx, tenant, amqpUrl(), { standardWebhooks: true });
      const nats = await createSubscription(ctx, tenant, natsUrl(), { standardWebhooks: true });
      const client = await createClient(ctx, tenant, { displayName: 'Broker Bound' });

      const posted = await until(() => receiver.requests.find((r) => r.path === '/same-body'));
      const queued = await until(() => rabbit.messages[0]);
      await eventually(async () => (await stream.count()) === 1);
      const [streamed] = await stream.messages();

      const eventId = JSON.parse(posted.body).id as string;
      assert.equal(JSON.parse(posted.body).data.clientId, client.id);
      // `created` is the second each one was sent in (the spec: "unix seconds at the moment of
      // sending"), as its attempt log records the send; the rest is the same, byte for byte.
      const sent = [
        [posted.body, https.data.id],
        [queued.body, amqp.data.id],
        [streamed.body, nats.data.id],
      ] as const;
      for (const [body, subscriptionId] of sent) {
        const [attempt] = await until(async () => {
          const log = await attemptLog(ctx.runtime.database.db, subscriptionId as string);
          return log.length > 0 ? log : undefined;
        });
        assert.ok(createdWithin(body, attempt), `${body} within ${JSON.stringify(attempt)}`);
      }
      const withoutCreated = (body: string) => body.replace(/"created":\d+/, '"created":0');
      for (const message of [queued, streamed]) {
        assert.equal(
          withoutCreated(message.body),
          withoutCreated(posted.body),
          'the message body is the HTTP body, byte for byte but for `created`',
        );
        assert.equal(message.headers['service-event-id'], eventId);
        assert.equal(message.headers['service-event-type'], 'client.created');
        assert.equal(message.headers['service-event-sequence'], '1');
        assert.equal(message.headers['service-delivery-attempt'], '1');
        assert.equal(message.headers['webhook-id'], eventId);
      }
      assert.equal(queued.messageId, eventId);
      assert.equal(streamed.headers['Nats-Msg-Id'], eventId);
      // Stripe's library verifies `service-signature`, the Standard Webhooks one `webhook-*`.
      for (const [message, secret] of [
        [queued, amqp.signingKey],
        [streamed, nats.signingKey],
      ] as const) {
        const event = stripe.webhooks.constructEvent(
          message.body,
          message.headers['service-signature'],
          secret,
        );
        assert.equal(event.id, eventId);
        new Webhook(secret).verify(message.body, {
          'webhook-id': message.headers['webhook-id'],
          'webhook-timestamp': message.headers['webhook-timestamp'],
          'webhook-signature': message.headers['webhook-signature'],
        });
      }
      const [natsAttempt] = await until(async () => {
        const all = await attemptsOf(nats.data.id as string);
        return all.length > 0 ? all : undefined;
      });
      assert.equal(natsAttempt.status, 200);
      assert.deepEqual(JSON.parse(natsAttempt.responseBody), {
        stream: stream.name,
        seq: 1,
        duplicate: false,
      });
      const [amqpAttempt] = await until(async () => {
        const all = await attemptsOf(amqp.data.id as string);
        return all.length > 0 ? all : undefined;
      });
      assert.equal(amqpAttempt.status, 200);
      for (const id of [https.data.id, amqp.data.id, nats.data.id]) await unsubscribe(id as string);
    });

    it('the consumer snippets, run in the documented order, verify what arrives and drop nothing', async () => {
      const id = randomBytes(4).toString('hex');
      const exchange = `tourops-snippet-${id}`;
      const subject = `tourops.snippet.${id}`;
      const rabbitEnv = {
        AMQP_URL: `amqp://guest:guest@127.0.0.1:${RABBIT_PORT}`,
        EXCHANGE: exchange,
        QUEUE: `${exchange}-queue`,
        BINDING: 'events.#',
      };
      const natsEnv = {
        NATS_URL: `127.0.0.1:${NATS_PORT}`,
        STREAM: `TOUROPS_SNIPPET_${id}`,
        SUBJECT: subject,
        DURABLE: 'snippet',
      };
      // First without a key, as docs/brokers.md orders it: each declares, says so, and stops.
      for (const [file, env] of [
        ['consumer-rabbitmq.mjs', rabbitEnv],
        ['consumer-nats.mjs', natsEnv],
      ] as const) {
        const run = spawnSync(process.execPath, [`docs/snippets/${file}`], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', ...env },
          encoding: 'utf8',
          timeout: 15_000,
        });
        assert.equal(run.status, 0, `${file}: ${run.stderr}`);
        assert.match(run.stdout, /declared .*set TOUROPS_SIGNING_KEYS to consume/, file);
      }
      const amqp = await createSubscription(
        ctx,
        tenant,
        `amqp://guest:guest@127.0.0.1:${RABBIT_PORT}/?exchange=${exchange}&routingKey=events.clients`,
      );
      const nats = await createSubscription(
        ctx,
        tenant,
        `nats://127.0.0.1:${NATS_PORT}?subject=${subject}`,
      );
      // An event while no consumer runs: it waits in the queue and the stream.
      const waiting = await createClient(ctx, tenant, { displayName: 'Snippet Waiting' });
      await until(async () => {
        const all = await attemptsOf(amqp.data.id as string);
        return all.some((a) => a.status === 200) || undefined;
      });
      const consumers = [
        await startConsumer('consumer-rabbitmq.mjs', {
          ...rabbitEnv,
          TOUROPS_SIGNING_KEYS: amqp.signingKey,
        }),
        await startConsumer('consumer-nats.mjs', {
          ...natsEnv,
          TOUROPS_SIGNING_KEYS: nats.signingKey,
        }),
      ];
      try {
        const client = await createClient(ctx, tenant, { displayName: 'Snippet Reader' });
        const events = await ctx.runtime.repositories.events.listForTenant(tenant.id);
        for (const about of [waiting, client]) {
          const event = events.find(
            (e) => e.type === 'client.created' && e.data.includes(about.id as string),
          );
          assert.ok(event);
          for (const consumer of consumers) {
            await eventually(
              () => consumer.output().includes(`verified client.created ${event.id}`),
              `a consumer verified the event:\n${consumer.output()}`,
            );
          }
        }
        for (const consumer of consumers) assert.doesNotMatch(consumer.output(), /refused/);
      } finally {
        for (const consumer of consumers) await consumer.stop();
        await unsubscribe(amqp.data.id as string);
        await unsubscribe(nats.data.id as string);
      }
      // The reference (/docs) shows these very files under Broker destinations.
      const reference = JSON.parse(
        (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).body,
      ).info.description as string;
      const section = reference.slice(reference.indexOf('## Broker destinations'));
      for (const file of ['consumer-rabbitmq.mjs', 'consumer-nats.mjs']) {
        const code = readFileSync(`${ROOT}/docs/snippets/${file}`, 'utf8').trim();
        assert.ok(section.includes(code), `${file} is on the reference page`);
      }
      const cleanup = await RabbitQueue.open();
      await cleanup.deleteExchange(exchange, `${exchange}-queue`);
      await cleanup.close();
      await NatsStream.remove(`TOUROPS_SNIPPET_${id}`);
    });

    it('tls:// publishes over TLS to a server whose certificate WEBHOOK_CA_FILE trusts', async () => {
      const server = await startTlsNats(await testCa());
      try {
        const subject = `tourops.tls.${randomBytes(4).toString('hex')}`;
        await server.manager.streams.add({ name: 'TOUROPS_TLS', subjects: [subject] });
        const tls = await createSubscription(
          ctx,
          tenant,
          `tls://127.0.0.1:${server.port}?subject=${subject}`,
        );
        const id = tls.data.id as string;
        await createClient(ctx, tenant, { displayName: 'Over TLS' });
        const [attempt] = await until(async () => {
          const all = await attemptsOf(id);
          return all.length > 0 ? all : undefined;
        });
        assert.equal(attempt.status, 200, attempt.responseBody);
        assert.equal(JSON.parse(attempt.responseBody).stream, 'TOUROPS_TLS');
        assert.equal((await server.manager.streams.info('TOUROPS_TLS')).state.messages, 1);
        await unsubscribe(id);
      } finally {
        await server.stop();
      }
    });

    it('amqps:// publishes over TLS to a RabbitMQ whose certificate WEBHOOK_CA_FILE trusts', async () => {
      const terminator = await BrokerProxy.start(RABBIT_PORT, await testCa());
      try {
        const before = rabbit.messages.length;
        const url = amqpUrl(rabbit.exchange, user.password, terminator.port).replace(
          'amqp://',
          'amqps://',
        );
        const amqps = await createSubscription(ctx, tenant, url);
        const id = amqps.data.id as string;
        assert.equal(amqps.data.url, url.replace(user.password, '***'));
        await createClient(ctx, tenant, { displayName: 'Over AMQPS' });
        const [attempt] = await until(async () => {
          const all = await attemptsOf(id);
          return all.length > 0 ? all : undefined;
        });
        assert.equal(attempt.status, 200, attempt.responseBody);
        await eventually(async () => rabbit.messages.length === before + 1);
        assert.equal(JSON.parse(rabbit.messages[before].body).data.displayName, 'Over AMQPS');
        await unsubscribe(id);
      } finally {
        await terminator.stop();
      }
    });

    it('a redelivery of a JetStream delivery leaves one message in the stream', async () => {
      const before = await stream.count();
      const nats = await createSubscription(ctx, tenant, natsUrl());
      const id = nats.data.id as string;
      await createClient(ctx, tenant, { displayName: 'Once Only' });
      await eventually(async () => (await stream.count()) === before + 1);
      const deliveries = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, {
        token: tenant.token,
      });
      const [delivery] = deliveries.json().data as Array<{ id: string; status: string }>;
      await eventually(async () => (await attemptsOf(id)).length === 1);
      const redelivered = await ctx.api(
        'POST',
        `/api/v1/webhooks/${id}/deliveries/${delivery.id}/redeliver`,
        { token: tenant.token },
      );
      assert.equal(redelivered.statusCode, 202, redelivered.body);
      const redeliveryId = redelivered.json().data.deliveryId as string;
      const ack = await until(async () => {
        const page = await ctx.api(
          'GET',
          `/api/v1/webhooks/${id}/deliveries/${redeliveryId}/attempts`,
          { token: tenant.token },
        );
        return (page.json().data as Attempt[])[0];
      });
      assert.equal(ack.status, 200);
      assert.equal(
        JSON.parse(ack.responseBody).duplicate,
        true,
        'the stream saw it as a duplicate',
      );
      assert.equal(await stream.count(), before + 1);
      await unsubscribe(id);
    });

    it('an unknown exchange, an unroutable message, a stream-less subject, a wrong password, an unknown virtual host and a closed port are failed attempts with their class, retried', async () => {
      const port = await closedPort();
      const cases = [
        { url: amqpUrl('no-such-exchange'), errorClass: 'broker_refused', words: /NOT_FOUND/ },
        {
          url: amqpUrl().replace(`routingKey=${rabbit.routingKey}`, 'routingKey=nobody.listens'),
          errorClass: 'broker_refused',
          words: /unroutable: NO_ROUTE/,
        },
        {
          url: natsUrl('tourops.nobody.listens'),
          errorClass: 'broker_refused',
          words: /no JetStream stream/,
        },
        {
          url: amqpUrl(rabbit.exchange, 'not-the-password'),
          errorClass: 'broker_refused',
          words: /ACCESS.REFUSED/,
        },
        {
          url: amqpUrl().replace('/?exchange', '/no-such-vhost?exchange'),
          errorClass: 'broker_refused',
          words: /virtual host "no-such-vhost"/,
        },
        {
          url: amqpUrl(rabbit.exchange, user.password, port),
          errorClass: 'connection_refused',
          words: /ECONNREFUSED/,
        },
        { url: natsUrl(stream.subject, port), errorClass: 'connection_refused', words: /./ },
      ];
      const ids: string[] = [];
      for (const one of cases) {
        ids.push((await createSubscription(ctx, tenant, one.url)).data.id as string);
      }
      await createClient(ctx, tenant, { displayName: 'Nowhere To Go' });
      for (const [index, one] of cases.entries()) {
        const attempts = await until(async () => {
          const all = await attemptsOf(ids[index]);
          return all.length >= 2 ? all : undefined;
        });
        for (const attempt of attempts) {
          assert.equal(attempt.status, null, one.url);
          assert.equal(attempt.errorClass, one.errorClass, `${one.url}: ${attempt.responseBody}`);
          assert.match(attempt.responseBody, one.words);
        }
        assert.deepEqual(
          attempts.map((a) => a.attempt).slice(0, 2),
          [1, 2],
          'retried after the failure',
        );
      }
      // The broker's refusals pause their subscription as a receiver's 4xx do (after three, here);
      // a port that refuses connections is no refusal of the receiver's: it stays active.
      for (const [index, one] of cases.entries()) {
        const refused = one.errorClass === 'broker_refused';
        const shown = await until(async () => {
          const read = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
          const data = read.json().data.find((sub: { id: string }) => sub.id === ids[index]);
          if (refused) return data.active ? undefined : data;
          const attempts = await attemptsOf(ids[index]);
          return attempts.length === 4 ? data : undefined;
        });
        assert.equal(shown.active, !refused, one.url);
        assert.equal(shown.pauseReason, refused ? 'consecutive_failures' : null, one.url);
        if (refused) assert.equal((await attemptsOf(ids[index])).length, 3, one.url);
      }
      for (const id of ids) await unsubscribe(id);
    });

    it('a full stream that refuses new messages is broker_busy and retried; a redelivery once there is room is stored', async () => {
      const full = await NatsStream.open({ max_msgs: 1, discard: DiscardPolicy.New });
      try {
        const nats = await createSubscription(ctx, tenant, natsUrl(full.subject));
        const id = nats.data.id as string;
        await createClient(ctx, tenant, { displayName: 'Fits' });
        await eventually(async () => (await full.count()) === 1);
        await createClient(ctx, tenant, { displayName: 'Waits' });
        const deliveries = async () =>
          (
            await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, { token: tenant.token })
          ).json().data as Array<{ id: string; status: string }>;
        const refused = await until(async () => {
          const all = await attemptsOf(id);
          const failed = all.filter((a) => a.errorClass !== null);
          return failed.length >= 2 ? failed : undefined;
        });
        for (const attempt of refused) {
          assert.equal(attempt.errorClass, 'broker_busy', attempt.responseBody);
          assert.match(attempt.responseBody, /maximum messages/);
        }
        const waiting = (await deliveries()).find((d) => d.status !== 'success');
        assert.ok(waiting);
        await eventually(async () =>
          (await deliveries()).some((d) => d.id === waiting.id && d.status === 'dead_letter'),
        );
        await full.purge();
        const redelivered = await ctx.api(
          'POST',
          `/api/v1/webhooks/${id}/deliveries/${waiting.id}/redeliver`,
          { token: tenant.token },
        );
        assert.equal(redelivered.statusCode, 202, redelivered.body);
        await eventually(async () => (await full.count()) === 1, 'the redelivery stored');
        const [stored] = await full.messages();
        assert.equal(JSON.parse(stored.body).data.displayName, 'Waits');
        await unsubscribe(id);
      } finally {
        await full.close();
      }
    });

    it("32 writers' events arrive in the stream with a contiguous sequence", async () => {
      const own = await NatsStream.open();
      try {
        const nats = await createSubscription(ctx, tenant, natsUrl(own.subject), {
          maxConcurrency: 8,
        });
        await Promise.all(
          Array.from({ length: 32 }, (_, i) =>
            createClient(ctx, tenant, { displayName: `Writer ${i}` }),
          ),
        );
        await eventually(async () => (await own.count()) === 32, '32 messages');
        const sequences = (await own.messages())
          .map((m) => JSON.parse(m.body).sequence as number)
          .sort((a, b) => a - b);
        assert.deepEqual(
          sequences,
          Array.from({ length: 32 }, (_, i) => i + 1),
        );
        await unsubscribe(nats.data.id as string);
      } finally {
        await own.close();
      }
    });

    it('a test fire reaches the stream, and maxPerSecond caps publishes as it caps POSTs', async () => {
      const own = await NatsStream.open();
      try {
        const nats = await createSubscription(ctx, tenant, natsUrl(own.subject), {
          maxPerSecond: 10,
          maxConcurrency: 8,
        });
        const id = nats.data.id as string;
        const fired = await ctx.api('POST', '/api/v1/webhooks/test', {
          token: tenant.token,
          body: { subscriptionId: id },
        });
        assert.equal(fired.json().data.deliveries, 1, fired.body);
        await eventually(async () => (await own.count()) === 1);
        const [test] = await own.messages();
        assert.equal(JSON.parse(test.body).test, true);
        await Promise.all(
          Array.from({ length: 24 }, (_, i) =>
            createClient(ctx, tenant, { displayName: `Paced ${i}` }),
          ),
        );
        await eventually(async () => (await own.count()) === 25, '25 messages');
        const log = await until(async () => {
          const all = await attemptLog(ctx.runtime.database.db, id);
          return all.length === 25 ? all : undefined;
        });
        assert.ok(
          mostWithin(log.map((a) => a.startMs)) <= 10,
          `at most 10 publishes in any second, saw ${mostWithin(log.map((a) => a.startMs))}`,
        );
        await unsubscribe(id);
      } finally {
        await own.close();
      }
    });

    it("the URL's password is sealed: never in a read, a log line, a span or the attempt log; a PATCH with the mask keeps it", async () => {
      exporter.reset();
      const amqp = await createSubscription(ctx, tenant, amqpUrl());
      const nats = await createSubscription(ctx, tenant, natsUrl());
      const amqpId = amqp.data.id as string;
      const natsId = nats.data.id as string;
      assert.equal(amqp.data.url, amqpUrl(rabbit.exchange, '***'));
      assert.equal(nats.data.url, natsUrl().replace(natsPassword, '***'));

      // The mask sent back keeps the password (a new routing key, same user and host).
      const renamed = amqpUrl(rabbit.exchange, '***').replace(rabbit.routingKey, 'events.renamed');
      const patched = await ctx.api('PATCH', `/api/v1/webhooks/${amqpId}`, {
        token: tenant.token,
        body: { url: renamed },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      assert.equal(patched.json().data.url, renamed);
      // ... but never to another host or user.
      for (const url of [
        renamed.replace('127.0.0.1', 'localhost'),
        renamed.replace(`${user.username}:`, 'guest:'),
      ]) {
        const refused = await ctx.api('PATCH', `/api/v1/webhooks/${amqpId}`, {
          token: tenant.token,
          body: { url },
        });
        assert.equal(refused.statusCode, 422, refused.body);
        assert.match(refused.json().errors.url[0], /same user, host and port/);
      }
      // Nor is the mask a password for a new subscription.
      const masked = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: renamed, events: ['client.created'] },
      });
      assert.equal(masked.statusCode, 422, masked.body);

      const countBefore = rabbit.messages.length;
      await createClient(ctx, tenant, { displayName: 'Sealed' });
      await until(() => rabbit.messages[countBefore]);
      assert.equal(rabbit.messages[countBefore].headers['service-event-type'], 'client.created');
      // The message arrived at once; its attempt is recorded in the recorder's next batch.
      await eventually(async () => (await attemptsOf(natsId)).length === 1);
      const [kept] = await until(async () => {
        const all = await attemptsOf(amqpId);
        return all.length > 0 ? all : undefined;
      });
      assert.equal(kept.status, 200, 'the kept password still logs in');

      const reads = [
        await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token }),
        await ctx.api('GET', `/api/v1/webhooks/${amqpId}/deliveries`, { token: tenant.token }),
        ...(await portalPages([
          `/portal/`,
          `/portal/endpoints/${amqpId}`,
          `/portal/endpoints/${natsId}`,
        ])),
      ];
      assert.ok(
        reads[2].body.includes(`${user.username}:***@127.0.0.1`),
        'the portal shows the mask',
      );
      const texts = [
        ...reads.map((r) => r.body),
        JSON.stringify(await attemptsOf(amqpId)),
        JSON.stringify(await attemptsOf(natsId)),
        logLines.join(''),
        JSON.stringify(exporter.getFinishedSpans().map((s) => [s.name, s.attributes])),
      ];
      assert.ok(
        exporter.getFinishedSpans().some((s) => s.name === `send ${rabbit.exchange}`),
        'the publish has its span',
      );
      const stored = await ctx.runtime.database.db
        .selectFrom('webhookSubscriptions')
        .select(['url', 'urlPassword'])
        .where('id', 'in', [amqpId, natsId])
        .execute();
      texts.push(JSON.stringify(stored));
      for (const text of texts) {
        assert.ok(!text.includes(user.password), 'the RabbitMQ password is never shown');
        assert.ok(!text.includes(natsPassword), 'the NATS password is never shown');
      }
      assert.ok(
        stored.every((row) => row.urlPassword !== null),
        'sealed at rest',
      );
      await unsubscribe(amqpId);
      await unsubscribe(natsId);
    });

    it('a broker refusing connections, or one that never answers, delays no HTTP subscription', async () => {
      const frozen = await frozenBroker();
      const refusing = await closedPort();
      try {
        const ids = [
          (await createSubscription(ctx, tenant, amqpUrl(rabbit.exchange, user.password, refusing)))
            .data.id,
          (
            await createSubscription(
              ctx,
              tenant,
              amqpUrl(rabbit.exchange, user.password, frozen.port),
            )
          ).data.id,
          (await createSubscription(ctx, tenant, natsUrl(stream.subject, frozen.port))).data.id,
        ] as string[];
        const https = await createSubscription(ctx, tenant, receiver.url('/beside-brokers'));
        const httpsId = https.data.id as string;
        for (let i = 0; i < 5; i++) {
          await createClient(ctx, tenant, { displayName: `Beside ${i}` });
        }
        await eventually(
          () => receiver.requests.filter((r) => r.path === '/beside-brokers').length === 5,
          'five HTTPS deliveries',
        );
        const log = await until(async () => {
          const all = await attemptLog(ctx.runtime.database.db, httpsId);
          return all.length === 5 ? all : undefined;
        });
        const firsts = log.filter((a) => a.attempt === 1);
        assert.equal(firsts.length, 5);
        assert.ok(firsts.every((attempt) => attempt.status === 204));
        const hung = await until(async () => {
          const all = await attemptsOf(ids[1]);
          return all.length > 0 ? all : undefined;
        });
        assert.equal(hung[0].errorClass, 'timeout', 'the frozen broker is a time-out');
        // The attempt log's own order: each event's HTTPS attempt started before the frozen
        // broker's attempt of the same event ended (at its time-out), so it waited for none.
        const { db } = ctx.runtime.database;
        const eventOf = new Map(
          (
            await deliveryRows(db)
              .select(['id', 'eventId'])
              .where('subscriptionId', 'in', [httpsId, ids[1]])
              .execute()
          ).map((row) => [row.id, row.eventId]),
        );
        const frozenEnds = new Map(
          (await attemptLog(db, ids[1]))
            .filter((attempt) => attempt.attempt === 1)
            .map((attempt) => [eventOf.get(attempt.deliveryId), attempt.endMs]),
        );
        const compared = firsts.filter((attempt) =>
          frozenEnds.has(eventOf.get(attempt.deliveryId)),
        );
        assert.ok(compared.length > 0, 'an event with both attempts logged');
        for (const attempt of compared) {
          const frozenEnd = frozenEnds.get(eventOf.get(attempt.deliveryId)) as number;
          assert.ok(
            attempt.startMs < frozenEnd,
            `an HTTPS attempt started ${attempt.startMs - frozenEnd} ms after the broker's ended`,
          );
        }
        for (const id of [...ids, httpsId]) await unsubscribe(id);
      } finally {
        await frozen.close();
      }
    });
  });
}

describe('broker TLS: an unverified certificate, or no TLS at all, is a tls failure', () => {
  const message = { eventId: 'evt', body: '{}', headers: { 'service-request-id': 'r.1' } };
  const sender = (caFile: string | null) =>
    new BrokerSender({
      guard: new AddressGuard({ allowPrivate: true }),
      timeoutMs: 3_000,
      idleMs: 60_000,
      tlsOptions: brokerTlsOptions(caFile),
    });

  it('tls:// to a server whose CA is not trusted, and tls:// or amqps:// to plaintext ports', async () => {
    const server = await startTlsNats(await testCa());
    const untrusting = sender(null);
    try {
      const cases = [
        `tls://127.0.0.1:${server.port}?subject=a`,
        `tls://127.0.0.1:${NATS_PORT}?subject=a`,
        `amqps://127.0.0.1:${RABBIT_PORT}/?exchange=x&routingKey=y`,
      ];
      for (const url of cases) {
        const result = await untrusting.send(url, null, message);
        assert.equal(result.errorClass, 'tls', `${url}: ${result.error} ${result.body}`);
        assert.equal(result.status, null);
      }
    } finally {
      await untrusting.close();
      await server.stop();
    }
  });
});

/** `promise`, or a failure naming `what` once it has hung for HUNG_AFTER_MS. */
function ends<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: hung`)), HUNG_AFTER_MS);
  });
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer));
}

describe('broker links: a broker that falls silent, or drops the link as it closes, holds up no stop', () => {
  // The link's time-out decides which way a close can end. Silent: only the time-out ends it (a
  // short one), so a close that ends at all ended by it. Dropped: a time-out no run reaches, so a
  // close that ends did not wait for it.
  const TIMEOUT_MS = { 'falls silent': 2_000, 'drops the link': 10 * HUNG_AFTER_MS } as const;
  const destinations = [
    {
      kind: 'RabbitMQ',
      open: async () => {
        const queue = await RabbitQueue.open();
        return {
          url: (port: number) =>
            `amqp://127.0.0.1:${port}/?exchange=${queue.exchange}&routingKey=${queue.routingKey}`,
          upstream: RABBIT_PORT,
          close: () => queue.close(),
        };
      },
    },
    {
      kind: 'NATS JetStream',
      open: async () => {
        const stream = await NatsStream.open();
        return {
          url: (port: number) => `nats://127.0.0.1:${port}?subject=${stream.subject}`,
          upstream: NATS_PORT,
          close: () => stream.close(),
        };
      },
    },
  ];

  for (const destination of destinations) {
    it(`${destination.kind}: the pool's close ends within the time-out, or at once when the link drops`, async () => {
      const broker = await destination.open();
      try {
        for (const fault of ['falls silent', 'drops the link'] as const) {
          const proxy = await BrokerProxy.start(broker.upstream);
          const sender = new BrokerSender({
            guard: new AddressGuard({ allowPrivate: true }),
            timeoutMs: TIMEOUT_MS[fault],
            idleMs: 60_000,
            tlsOptions: brokerTlsOptions(null),
          });
          try {
            const eventId = `evt_${randomBytes(6).toString('hex')}`;
            const sent = await sender.send(broker.url(proxy.port), null, {
              eventId,
              body: '{}',
              headers: { 'service-request-id': `${eventId}.1` },
            });
            assert.equal(sent.acknowledged, true, `${sent.error} ${sent.body}`);
            let closing: Promise<void>;
            if (fault === 'falls silent') {
              proxy.freeze();
              closing = sender.close();
            } else {
              closing = sender.close();
              proxy.cut();
            }
            await ends(closing, `the close after the broker ${fault}`);
          } finally {
            await proxy.stop();
          }
        }
      } finally {
        await broker.close();
      }
    });
  }
});
