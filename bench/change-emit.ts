/**
 * The change-event row of `npm run bench -- --only deliveries`: what an event's `object` and
 * `changes` cost at emit. One tenant with SUBSCRIBERS subscriptions to `client.updated` (no worker
 * runs); a client archived and unarchived in turn through ClientsService (the admin API's path:
 * its lock, update and event in one transaction), this process's CPU a change; and, over the same
 * rows, what making `object` and `changes` takes alone (two serializations and a diff), so the row
 * says which share of a change is theirs. Also the event's `data` in bytes, with and without them.
 */

import { changesBetween, publicObject } from '../src/domain/change-events.ts';
import { silentRuntime } from './deliveries.ts';
import { median } from './measure.ts';

const SUBSCRIBERS = 4;

export interface ChangeEmitResult {
  backend: string;
  subscriptions: number;
  changes: number;
  /** Medians over the rounds, this process's CPU µs: a whole change, and object + changes alone. */
  cpuUsPerChange: number;
  cpuUsObjectAndChanges: number;
  /** `data` of one event as JSON, and its members alone. */
  dataBytes: number;
  membersBytes: number;
}

export async function benchChangeEmit(options: {
  backend: string;
  dbEnv: Record<string, string>;
  changes: number;
  rounds: number;
  log(message: string): void;
}): Promise<ChangeEmitResult> {
  const runtime = await silentRuntime(options.dbEnv);
  try {
    const { services, repositories } = runtime;
    const tenant = await services.tenants.create({
      name: 'Bench changes',
      slug: 'bench-changes',
      tier: 'enterprise',
    });
    for (let i = 0; i < SUBSCRIBERS; i++) {
      // Port 9: nothing listens, and no worker runs here to try.
      await services.webhooks.create(tenant.id, {
        url: `https://127.0.0.1:9/changes/${i}`,
        events: ['client.updated'],
      });
    }
    const client = await services.clients.create(tenant.id, {
      kind: 'company',
      displayName: 'Bench Changes Ltd',
      email: 'ops@changes.test',
      countryIso: 'pt',
      tags: ['bench', 'changes'],
    });
    let archived = false;
    const cpuOf = async (run: () => Promise<void> | void) => {
      const cpu = process.cpuUsage();
      for (let i = 0; i < options.changes; i++) await run();
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / options.changes;
    };
    const change = async () => {
      archived = !archived;
      await services.clients.setArchived(tenant.id, client.id, archived);
    };
    const before = await services.clients.get(tenant.id, client.id);
    const after = { ...before, archivedAt: new Date().toISOString(), updatedAt: 'x' };
    const objectAndChanges = () => {
      changesBetween(publicObject('client', before), publicObject('client', after));
    };
    // Warm-up: prepared statements, compiled serializers and validators, the JIT.
    await cpuOf(change);
    await cpuOf(objectAndChanges);
    const whole: number[] = [];
    const alone: number[] = [];
    for (let round = 0; round < options.rounds; round++) {
      whole.push(await cpuOf(change));
      alone.push(await cpuOf(objectAndChanges));
    }
    const [event] = (await repositories.events.listForTenant(tenant.id)).slice(-1);
    const data = JSON.parse(event.data) as Record<string, unknown>;
    const { object: _object, changes: _changes, ...members } = data;
    const result = {
      backend: options.backend,
      subscriptions: SUBSCRIBERS,
      changes: options.changes,
      cpuUsPerChange: median(whole),
      cpuUsObjectAndChanges: median(alone),
      dataBytes: event.data.length,
      membersBytes: JSON.stringify(members).length,
    };
    options.log(
      `${options.backend}: a client change with its event: ${result.cpuUsPerChange.toFixed(0)} µs CPU, ` +
        `object and changes ${result.cpuUsObjectAndChanges.toFixed(1)} µs of it`,
    );
    return result;
  } finally {
    await runtime.close();
  }
}
