import { setTimeout as sleep } from 'node:timers/promises';

// A client load through a balancer: test/several-machines.test.ts and the compose test.

export interface Load {
  label: string;
  /** Idempotency-Key → client id, for every create answered 201. */
  acked: Map<string, string>;
  requests: number;
  statuses: Map<string, number>;
  /** What a client of the product would call a failure: a connection error or a 5xx. */
  failures: string[];
  stop(): Promise<void>;
}

/**
 * `clients` loops through the balancer on `port`, each a keyed create then a read of what it
 * created, until stopped. A 503 is retried with the same key when `retry503` (as the SDK does);
 * anything else that is not 2xx is a failure.
 */
export function drive(
  label: string,
  port: number,
  token: string,
  clients: number,
  retry503 = false,
): Load {
  let stopped = false;
  const load: Load = {
    label,
    acked: new Map(),
    requests: 0,
    statuses: new Map(),
    failures: [],
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
  const base = `http://127.0.0.1:${port}`;
  /** One request; a 503 sent again after 100 ms with the same key when `retry503`. */
  const call = async (
    method: string,
    path: string,
    body?: unknown,
    key?: string,
  ): Promise<{ status: number; text: string }> => {
    load.requests += 1;
    let answer: { status: number; text: string };
    try {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...(key ? { 'idempotency-key': key } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      answer = { status: response.status, text: await response.text() };
      const status = String(response.status);
      load.statuses.set(status, (load.statuses.get(status) ?? 0) + 1);
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const what = `connection error ${cause?.code ?? cause?.message ?? String(error)}`;
      load.statuses.set(what, (load.statuses.get(what) ?? 0) + 1);
      return { status: 0, text: what };
    }
    if (!retry503 || answer.status !== 503) return answer;
    await sleep(100);
    return call(method, path, body, key);
  };
  const loop = async (client: number) => {
    for (let n = 0; !stopped; n++) {
      const key = `${label}-${client}-${n}`;
      const created = await call(
        'POST',
        '/api/v1/clients',
        { kind: 'individual', displayName: key },
        key,
      );
      if (created.status === 201) {
        const id = JSON.parse(created.text).data.id as string;
        load.acked.set(key, id);
        const read = await call('GET', `/api/v1/clients/${id}`);
        if (read.status !== 200)
          load.failures.push(`GET ${id}: ${read.status} ${read.text.slice(0, 200)}`);
      } else {
        load.failures.push(`POST ${key}: ${created.status} ${created.text.slice(0, 200)}`);
      }
      await sleep(50);
    }
  };
  const loops = Array.from({ length: clients }, (_, i) => loop(i));
  return load;
}
