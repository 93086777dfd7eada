import { setTimeout as sleep } from 'node:timers/promises';
import { deliveryRequest, LISTEN_USER_AGENT } from '../domain/delivery-request.ts';
import type { PayloadForm } from '../domain/thin-payload.ts';
import type { Runtime } from '../runtime.ts';

export interface ListenOptions {
  tenantId: string;
  /** Only these types; null: every type. */
  events: ReadonlySet<string> | null;
  forwardTo: URL;
  signingKey: string;
  /** The bodies' form, as a subscription's `payload`. */
  payload: PayloadForm;
  /** Between two reads of the events table. */
  pollMs?: number;
  /** Called once where "from now on" starts is read: an event committed after it is forwarded. */
  ready?: () => void;
}

interface Line {
  write(chunk: string): unknown;
}

/** Events read per query. */
const BATCH = 500;

/**
 * How long an event may take to appear below one already read. On PostgreSQL `seq` is taken at
 * insert and a transaction can commit after a later one; so the query starts this far back
 * (ids already forwarded are skipped) rather than at the newest event seen.
 */
const LATE_COMMIT_MS = 30_000;

/**
 * `tourops listen`: forwards the tenant's events committed from now on to a URL on this machine,
 * signed exactly like a delivery (same body, same headers, `signingKey`), one at a time and in
 * order, printing each with the local answer. Nothing is written to the database: stopping
 * leaves nothing behind. Returns the number forwarded when `signal` aborts.
 */
export async function forwardEvents(
  runtime: Runtime,
  options: ListenOptions,
  out: Line,
  signal: AbortSignal,
): Promise<number> {
  const { events } = runtime.services;
  const timeoutMs = runtime.config.webhook.timeoutMs;
  let floor = await events.newestSeq(options.tenantId);
  options.ready?.();
  // seq → when it was read: ids between the floor and the newest read are skipped.
  const read = new Map<number, number>();
  let forwarded = 0;
  while (!signal.aborted) {
    const now = Date.now();
    for (let after = floor, full = true; full && !signal.aborted; ) {
      const rows = await events.after(options.tenantId, after, BATCH);
      full = rows.length === BATCH;
      for (const row of rows) {
        const seq = Number(row.seq);
        after = seq;
        if (read.has(seq)) continue;
        read.set(seq, now);
        if (options.events !== null && !options.events.has(row.type)) continue;
        forwarded += 1;
        // The tenant's stream, not a subscription's ledger: no sequence.
        const event = { ...row, sequence: null };
        const request = deliveryRequest(
          event,
          Math.floor(Date.now() / 1000),
          [options.signingKey],
          {
            requestId: `listen_${row.id}.1`,
            attempt: 1,
            userAgent: LISTEN_USER_AGENT,
          },
          { payload: options.payload },
        );
        const answer = await post(options.forwardTo, request, timeoutMs);
        out.write(`${new Date().toISOString()}  ${row.type}  ${row.id}  → ${answer}\n`);
      }
    }
    for (const [seq, at] of read) {
      if (now - at < LATE_COMMIT_MS) continue;
      floor = Math.max(floor, seq);
      read.delete(seq);
    }
    await sleep(options.pollMs ?? 250, undefined, { signal }).catch(() => undefined);
  }
  return forwarded;
}

/** The local endpoint's answer in a few words: `204 (3 ms)`, or why there was none. */
async function post(
  url: URL,
  request: { body: string; headers: Record<string, string> },
  timeoutMs: number,
): Promise<string> {
  const started = performance.now();
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = (await response.text()).replace(/\s+/g, ' ').trim().slice(0, 120);
    const ms = Math.round(performance.now() - started);
    return `${response.status} (${ms} ms)${text === '' ? '' : `  ${text}`}`;
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    if ((error as Error).name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
    return `failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`;
  }
}
