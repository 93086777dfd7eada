import { readFileSync } from 'node:fs';
import { DELIVERY_STATUSES, isOneOf } from '../domain/states.ts';
import { tenantOption } from './account-commands.ts';
import { UsageError } from './args.ts';
import { type Command, namingNotFound } from './command.ts';
import { columns } from './values.ts';

/**
 * The webhook commands: list a tenant's subscriptions, enable one, list, redeliver and recover
 * its deliveries.
 */

export const webhookListCommand: Command = {
  name: 'webhook list',
  summary: "list a tenant's webhook subscriptions, newest first",
  description: [
    'Each subscription with its state, its event types, its payload filter (none: every event ' +
      'of its types), whether it has a transformation and its retry schedule (default: the ' +
      "deployment's WEBHOOK_RETRY_SCHEDULE). Deleted ones are listed too.",
    "JSON: an array of subscriptions (the API's subscription objects), newest first.",
  ],
  positionals: [],
  options: { ...tenantOption },
  json: true,
  async run(ctx, args) {
    const tenantRef = args.required('tenant');
    const subscriptions = await ctx.withRuntime(async (runtime) => {
      const tenant = await namingNotFound(
        runtime,
        runtime.services.tenants.resolve(tenantRef),
        `Tenant "${tenantRef}"`,
      );
      return runtime.services.webhooks.list(tenant.id);
    });
    const rows = subscriptions.map((s) => [
      s.id,
      s.deliveryState.reason ?? 'active',
      s.url,
      s.events.join(','),
      s.filter === null ? '-' : JSON.stringify(s.filter),
      s.transformation === null ? '-' : 'yes',
      s.retrySchedule === null ? 'default' : s.retrySchedule.join(','),
    ]);
    ctx.print(
      rows.length === 0
        ? 'No webhook subscriptions.\n'
        : columns(['ID', 'STATE', 'URL', 'EVENTS', 'FILTER', 'TRANSFORM', 'RETRIES'], rows),
      subscriptions,
    );
    return 'done';
  },
};

export const webhookEnableCommand: Command = {
  name: 'webhook enable',
  summary: 're-enable a paused webhook subscription',
  description: [
    'Makes the subscription active again and clears pausedAt and consecutiveFailures; its pending ' +
      'deliveries resume. A deleted subscription cannot be re-enabled.',
    'JSON: the subscription object.',
  ],
  positionals: [{ name: 'id', description: 'the subscription id (whs_…)' }],
  options: {},
  json: true,
  async run(ctx, args) {
    const [id] = args.positionals;
    const subscription = await ctx.withRuntime((runtime) =>
      namingNotFound(runtime, runtime.services.webhooks.enable(id), `Webhook subscription "${id}"`),
    );
    ctx.print(
      `Webhook subscription ${subscription.id} enabled (${subscription.url}).\n`,
      subscription,
    );
    return 'done';
  },
};

export const webhookTransformationCommand: Command = {
  name: 'webhook transformation',
  summary: "dry-run a transformation over a subscription's last 50 events",
  description: [
    'Runs the JavaScript in --code (a file defining handler(webhook)) over the last 50 events of ' +
      "the subscription's ledger, each as its delivery would go now, as POST " +
      '/api/v1/webhooks/transformations/test does: nothing is stored or sent. Each event prints ' +
      'what would be sent (or that it would be cancelled), or why its attempt would fail with ' +
      'transformation_failed. Code that does not compile is refused with its line.',
    'JSON: {"events": [{"id", "type", "sequence", "result"?, "error"?}]}.',
  ],
  positionals: [{ name: 'id', description: 'the subscription id (whs_…)' }],
  options: {
    code: {
      type: 'string',
      value: '<file>',
      required: true,
      description: 'the transformation: a JavaScript file defining handler(webhook)',
    },
  },
  json: true,
  async run(ctx, args) {
    const [id] = args.positionals;
    const file = args.required('code');
    let code: string;
    try {
      code = readFileSync(file, 'utf8');
    } catch (error) {
      throw new UsageError(
        `--code: cannot read ${file} (${(error as Error).message})`,
        'webhook transformation',
      );
    }
    const answer = await ctx.withRuntime(async (runtime) => {
      const { webhooks, dryRuns } = runtime.services;
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return dryRuns.testTransformation(tenantId, { code, subscriptionId: id });
    });
    const events = 'events' in answer ? answer.events : [];
    const rows = events.map((event) => [
      String(event.sequence),
      event.type,
      'error' in event
        ? `fails: ${event.error}`
        : event.result.cancel
          ? 'cancelled: nothing sent'
          : `${event.result.url} ${JSON.stringify(event.result.payload).slice(0, 80)}`,
    ]);
    ctx.print(
      rows.length === 0 ? 'No events in its ledger.\n' : columns(['SEQ', 'TYPE', 'SENDS'], rows),
      answer,
    );
    return 'done';
  },
};

const webhookOption = {
  webhook: {
    type: 'string' as const,
    value: '<id>',
    required: true,
    description: 'the subscription id (whs_…)',
    // The API calls it a subscription: both words work.
    aliases: ['subscription'],
  },
};

export const deliveryListCommand: Command = {
  name: 'delivery list',
  summary: "list a webhook subscription's deliveries, newest first",
  description: ["JSON: an array of deliveries (the API's delivery objects), newest first."],
  positionals: [],
  options: {
    ...webhookOption,
    status: {
      type: 'string',
      value: '<pending|in_flight|success|dead_letter>',
      description: 'only deliveries in this status',
    },
    limit: { type: 'string', value: '<n>', description: 'at most n (1-100, default 20)' },
    cursor: {
      type: 'string',
      value: '<cursor>',
      description: 'the next page, as the previous page printed it',
    },
  },
  json: true,
  async run(ctx, args) {
    const command = 'delivery list';
    const id = args.required('webhook');
    const status = args.string('status');
    if (status !== undefined && !isOneOf(DELIVERY_STATUSES, status)) {
      throw new UsageError(`--status must be one of ${DELIVERY_STATUSES.join(', ')}`, command);
    }
    const limit = Number(args.string('limit') ?? '20');
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new UsageError('--limit must be an integer from 1 to 100', command);
    }
    const page = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return deliveries.listDeliveries(tenantId, id, {
        limit,
        status,
        cursor: args.string('cursor'),
      });
    });
    const lines = page.data.map(
      (d) =>
        `${d.id}  ${d.status}  ${d.eventType}  attempts ${d.attempts}` +
        `${d.lastResponseStatus === null ? '' : `  last ${d.lastResponseStatus}`}` +
        `${d.lastError === null ? '' : `  ${d.lastError}`}  ${d.createdAt}\n`,
    );
    const more = page.meta.hasMore
      ? `More: tourops delivery list --webhook ${id} --cursor ${page.meta.cursor}\n`
      : '';
    ctx.print(lines.length === 0 ? 'No deliveries.\n' : lines.join('') + more, page.data);
    return 'done';
  },
};

export const deliveryRedeliverCommand: Command = {
  name: 'delivery redeliver',
  summary: 'send a delivery again (a new delivery, the same event)',
  description: ['JSON: {"deliveryId", "eventId", "status": "pending"}.'],
  positionals: [{ name: 'delivery', description: 'the delivery id (dlv_…)' }],
  options: {
    webhook: {
      ...webhookOption.webhook,
      required: false,
      description: "the subscription id (whs_…); default: the delivery's own",
    },
  },
  json: true,
  async run(ctx, args) {
    const [deliveryId] = args.positionals;
    const queued = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      // Delivery ids are unique: the subscription is the delivery's unless one is named.
      const id =
        args.string('webhook') ??
        (await namingNotFound(
          runtime,
          deliveries.subscriptionOfDelivery(deliveryId),
          `Delivery "${deliveryId}"`,
        ));
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return namingNotFound(
        runtime,
        deliveries.redeliver(tenantId, id, deliveryId),
        `Delivery "${deliveryId}"`,
      );
    });
    ctx.print(`Queued ${queued.deliveryId} (event ${queued.eventId}).\n`, queued);
    return 'done';
  },
};

export const deliveryRecoverCommand: Command = {
  name: 'delivery recover',
  summary: 'redeliver every dead letter of a time window (at most 10,000)',
  description: [
    'Queues one new delivery for every dead-lettered delivery of the subscription created at or ' +
      'after --since and before --until (default now), as POST /api/v1/webhooks/{id}/recover does.',
    'JSON: {"queued": <n>}.',
  ],
  positionals: [],
  options: {
    ...webhookOption,
    since: {
      type: 'string',
      value: '<date-time>',
      required: true,
      description: 'start of the window, e.g. 2026-11-24T00:00:00Z',
    },
    until: { type: 'string', value: '<date-time>', description: 'end of the window (excluded)' },
  },
  json: true,
  async run(ctx, args) {
    const id = args.required('webhook');
    const since = args.required('since');
    const until = args.string('until');
    const result = await ctx.withRuntime(async (runtime) => {
      const { webhooks, deliveries } = runtime.services;
      const tenantId = await namingNotFound(
        runtime,
        webhooks.tenantOf(id),
        `Webhook subscription "${id}"`,
      );
      return deliveries.recover(tenantId, id, until === undefined ? { since } : { since, until });
    });
    ctx.print(`Queued ${result.queued} deliveries.\n`, result);
    return 'done';
  },
};

/** The plural spelling of earlier versions, kept working. */
export const webhooksEnableCommand: Command = {
  ...webhookEnableCommand,
  name: 'webhooks enable',
  summary: 'the same as webhook enable (kept for scripts)',
};
