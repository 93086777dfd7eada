import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { type BACKENDS, createTestContext, type TestContext } from './context.ts';
import { createTenant, type TenantFixture } from './fixtures.ts';
import { HttpsReceiver, testCa } from './https-receiver.ts';

// `tourops worker` as operators run it: the set-up of test/webhook-workers.test.ts and
// test/scale-out-workers.test.ts (a database, a tenant, a receiver, the workers' environment).

/** Milliseconds between consecutive times, for a failure's message. */
export const gaps = (times: number[]) =>
  [...times]
    .sort((a, b) => a - b)
    .map((at, i, all) => Math.round(at - (all[i - 1] ?? at)))
    .join(' ');

export const WORKER_READY = 'Webhook delivery worker running';

/** Local TCP ports of a process's sockets (Linux /proc), or null where /proc is missing. */
export function localPorts(pid: number): Set<number> | null {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return null;
  }
  const inodes = new Set<string>();
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      if (columns.length > 9 && inodes.has(columns[9])) {
        ports.add(Number.parseInt(columns[1].split(':')[1], 16));
      }
    }
  }
  return ports;
}

export interface Setup {
  ctx: TestContext;
  tenant: TenantFixture;
  receiver: HttpsReceiver;
  env: Record<string, string>;
  /** A `client.created` subscription to the receiver's `path`, with `settings` (maxPerSecond…). */
  subscribe(path: string, settings?: Record<string, unknown>): Promise<string>;
  createClient(name: string): Promise<void>;
  delivery(subscriptionId: string): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** `timeoutMs`: the attempt time-out, longer than DEAD_AFTER_MS where an attempt must outlive it. */
export async function setUp(
  backend: (typeof BACKENDS)[number],
  timeoutMs = 10_000,
): Promise<Setup> {
  const ca = await testCa();
  const webhookEnv = {
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: ca.caFile,
    WEBHOOK_TIMEOUT_MS: String(timeoutMs),
  };
  const ctx = await createTestContext(backend, { env: webhookEnv });
  const tenant = await createTenant(ctx, { tier: 'enterprise' });
  const receiver = await HttpsReceiver.start();
  return {
    ctx,
    tenant,
    receiver,
    env: { ...ctx.env, LOG_LEVEL: 'warn' },
    async subscribe(path, settings = {}) {
      const response = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url(path), events: ['client.created'], ...settings },
      });
      assert.equal(response.statusCode, 201, response.body);
      return response.json().data.id;
    },
    async createClient(displayName) {
      const response = await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName },
      });
      assert.equal(response.statusCode, 201, response.body);
    },
    async delivery(subscriptionId) {
      const response = await ctx.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries`, {
        token: tenant.token,
      });
      const [row] = response.json().data as Array<Record<string, unknown>>;
      return row;
    },
    async close() {
      await receiver.close();
      await ctx.close();
    },
  };
}
