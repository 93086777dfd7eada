/**
 * Load windows and the measurements made of them.
 *
 * A window is one autocannon run against one server child: a warm-up, then the measured part, on
 * the same connections (so the measurement sees the steady state, not 50 connections being
 * opened at once). Latencies are kept at sub-millisecond precision (autocannon's own histogram
 * truncates to whole milliseconds), and the CPU used by the server, PostgreSQL, autocannon and
 * the rest of the machine is sampled over exactly the measured part.
 *
 * A measurement combines the windows of one probe (the benchmark interleaves the probes it
 * compares, round after round, so a slow minute of the machine hits both sides of a ratio).
 */

import { fork } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import autocannon, { type Result } from 'autocannon';
import type { OpenLoopConfig, OpenLoopResult } from './open-loop.ts';
import {
  commandCpuDelta,
  commandCpuSeconds,
  REPO_ROOT,
  type ServerProcess,
  systemCpu,
} from './processes.ts';

export interface LoadOptions {
  url: string;
  /** GET when omitted. */
  method?: string;
  headers?: Record<string, string>;
  /** Request body, sent as is (set its content-type in `headers`). */
  body?: string;
  /** Headers added to every single request, drawn anew each time (an Idempotency-Key). */
  perRequestHeaders?: () => Record<string, string>;
  connections: number;
  warmupSec: number;
  /** The measured part's length; with `until`, its upper bound. */
  durationSec: number;
  /**
   * Ends the measured part when it settles (a background job the window measures the API
   * during); called when the measured part opens.
   */
  until?: () => Promise<unknown>;
}

/** The raw outcome of one window's measured part. */
export interface Window {
  wallSec: number;
  /** 2xx responses. */
  requests: number;
  non2xx: number;
  errors: number;
  /** Timeouts of the whole run, warm-up included. */
  timeouts: number;
  statusCodes: Record<string, number>;
  bytes: number;
  /** Latencies of the 2xx responses, ms. */
  latencies: Float64Array;
  serverCpuSec: number | null;
  dbCpuSec: number | null;
  clientCpuSec: number;
  systemBusy: number | null;
  systemTotal: number | null;
  /** Machine CPU used just before the window with the bench idle, percent of one core. */
  backgroundCpuPct: number | null;
  /**
   * Open loop: the longest the generator's own event loop was held up in the measured part, ms.
   * Requests due meanwhile leave late and their answers are read late, and both count in their
   * latency: this much of the tail can be the generator's (mostly its garbage collection).
   */
  generatorStallMs?: number;
  /** Open loop: the mark-compacts the server ran in the measured part (NaN: unknown). */
  serverMarkCompacts?: number;
  /** Open loop: the errors by their words (see OpenLoopResult). */
  errorKinds?: Record<string, number>;
}

export interface Measurement {
  label: string;
  backend: string;
  url: string;
  /** Measured seconds, all windows together. */
  durationSec: number;
  /** req/s of each window, in order. */
  windowRps: number[];
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /** Responses that were not 2xx, socket errors and timeouts: any of these voids the run. */
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  bytesPerResponse: number;
  /** Server process CPU, percent of one core. */
  serverCpuPct: number | null;
  /** Server process CPU per answered request, microseconds. */
  serverCpuUsPerRequest: number | null;
  /** PostgreSQL processes' CPU, percent of one core (null when not measured). */
  dbCpuPct: number | null;
  /** Whole machine busy, percent of all cores. */
  systemCpuPct: number | null;
  /** This process (autocannon), percent of one core: near 100 means the client was the limit. */
  clientCpuPct: number;
  /**
   * Machine CPU not used by the server, autocannon or PostgreSQL, percent of one core: kernel
   * network work, and any other process on the machine (a busy neighbour depresses the numbers).
   */
  otherCpuPct: number | null;
  /** Highest machine CPU seen just before a window with the bench idle, percent of one core. */
  backgroundCpuPct: number | null;
}

/** Float64 samples that grow in chunks (a fast window answers several hundred thousand requests). */
class Samples {
  #data = new Float64Array(1 << 16);
  #length = 0;
  push(value: number): void {
    if (this.#length === this.#data.length) {
      const next = new Float64Array(this.#data.length * 2);
      next.set(this.#data);
      this.#data = next;
    }
    this.#data[this.#length++] = value;
  }
  values(): Float64Array {
    return this.#data.slice(0, this.#length);
  }
}

/** The middle value, the mean of the two middle ones for an even count (`values` in any order). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** Nearest-rank percentile of values sorted ascending. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** Machine CPU in use while nothing of the benchmark runs, percent of one core. */
export async function backgroundCpu(sampleMs = 500): Promise<number | null> {
  const before = systemCpu();
  await new Promise((resolve) => setTimeout(resolve, sampleMs));
  const after = systemCpu();
  if (!before || !after || after.total <= before.total) return null;
  return ((after.busy - before.busy) / (after.total - before.total)) * 100 * cpus().length;
}

interface CpuSnapshot {
  at: number;
  server: number | null;
  db: Map<number, number> | null;
  system: ReturnType<typeof systemCpu>;
  client: NodeJS.CpuUsage;
}

function snapshot(server: ServerProcess, dbProcessName?: string): CpuSnapshot {
  return {
    at: performance.now(),
    server: server.cpuSeconds(),
    db: dbProcessName ? commandCpuSeconds(dbProcessName) : null,
    system: systemCpu(),
    client: process.cpuUsage(),
  };
}

export interface WindowHooks {
  dbProcessName?: string;
  /** Called when the measured part opens (CPU profiling). */
  onMeasureStart?: () => void;
}

export async function runWindow(
  server: ServerProcess,
  options: LoadOptions,
  hooks: WindowHooks = {},
): Promise<Window> {
  const background = await backgroundCpu();
  const samples = new Samples();
  const statusCodes: Record<string, number> = {};
  let recording = false;
  let requests = 0;
  let non2xx = 0;
  let errors = 0;
  let bytes = 0;
  let start: CpuSnapshot | null = null;
  const perRequest = options.perRequestHeaders;

  const result = await new Promise<Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: options.warmupSec + options.durationSec,
        pipelining: 1,
        timeout: 10,
        headers: options.headers,
        // Only what is set: an explicit undefined would override autocannon's defaults.
        ...(options.method ? { method: options.method } : {}),
        ...(options.body !== undefined ? { body: options.body } : {}),
        ...(perRequest
          ? {
              requests: [
                {
                  setupRequest: (request) => {
                    // autocannon hands every request its own copy of the headers.
                    Object.assign(request.headers, perRequest());
                    return request;
                  },
                },
              ],
            }
          : {}),
      },
      (error, result) => {
        clearTimeout(opener);
        return error ? reject(error) : resolve(result);
      },
    );
    const opener = setTimeout(() => {
      start = snapshot(server, hooks.dbProcessName);
      recording = true;
      hooks.onMeasureStart?.();
      options.until?.().then(
        () => instance.stop(),
        (error) => {
          instance.stop();
          reject(error);
        },
      );
    }, options.warmupSec * 1000);
    instance.on('response', (_client, statusCode, responseBytes, responseTimeMs) => {
      if (!recording) return;
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      if (statusCode >= 200 && statusCode < 300) {
        samples.push(responseTimeMs);
        requests++;
        bytes += responseBytes;
      } else {
        non2xx++;
      }
    });
    instance.on('reqError', () => {
      if (recording) errors++;
    });
  });
  recording = false;
  const end = snapshot(server, hooks.dbProcessName);
  return measured(options.url, start, end, background, {
    requests,
    non2xx,
    errors,
    timeouts: result.timeouts,
    statusCodes,
    bytes,
    latencies: samples.values(),
  });
}

/** A window from its counts and the CPU snapshots that opened and closed its measured part. */
function measured(
  url: string,
  start: CpuSnapshot | null,
  end: CpuSnapshot,
  background: number | null,
  counts: Pick<
    Window,
    'requests' | 'non2xx' | 'errors' | 'timeouts' | 'statusCodes' | 'bytes' | 'latencies'
  >,
): Window {
  if (!start) throw new Error(`${url}: the run ended before its measured part began`);
  const delta = (a: number | null, b: number | null) => (a !== null && b !== null ? b - a : null);
  return {
    ...counts,
    wallSec: (end.at - start.at) / 1000,
    serverCpuSec: delta(start.server, end.server),
    dbCpuSec: start.db === null && end.db === null ? null : commandCpuDelta(start.db, end.db),
    clientCpuSec:
      (end.client.user - start.client.user + (end.client.system - start.client.system)) / 1e6,
    systemBusy: delta(start.system?.busy ?? null, end.system?.busy ?? null),
    systemTotal: delta(start.system?.total ?? null, end.system?.total ?? null),
    backgroundCpuPct: background,
  };
}

/**
 * An open-loop window: requests are sent on a fixed schedule (`rate` a second, spread evenly,
 * issued by a 1 ms ticker) whatever the server's answers, over a pool of `connections` keep-alive
 * connections; a request finding every connection busy waits for one. Each latency is measured
 * from the request's scheduled time, so time spent queued behind a slow answer counts (no
 * coordinated omission). autocannon's `overallRate` is not this: each connection runs flat out
 * until it has spent its requests of the second, then idles. The generator is a child process
 * (bench/open-loop.ts) with nothing else on its heap.
 */
export async function runOpenLoopWindow(
  server: ServerProcess,
  options: OpenLoopConfig,
  hooks: WindowHooks = {},
): Promise<Window> {
  const background = await backgroundCpu();
  const child = fork(join(REPO_ROOT, 'bench', 'open-loop.ts'), [], {
    cwd: REPO_ROOT,
    execArgv: ['--import', 'tsx'],
    env: { PATH: process.env.PATH ?? '', BENCH_OPEN_LOOP: JSON.stringify(options) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  let start: CpuSnapshot | null = null;
  let markCompactsBefore: Promise<number> | null = null;
  const result = await new Promise<OpenLoopResult>((resolve, reject) => {
    child.on('message', (message: { kind: string }) => {
      if (message.kind === 'measuring') {
        start = snapshot(server, hooks.dbProcessName);
        // NaN when the child does not answer (reported as unknown, not a failed run).
        markCompactsBefore = server.markCompacts().catch(() => Number.NaN);
        hooks.onMeasureStart?.();
      } else if (message.kind === 'done') {
        resolve(message as OpenLoopResult);
      }
    });
    child.once('exit', (code) => reject(new Error(`open-loop generator exited (${code})`)));
  });
  const finished = snapshot(server, hooks.dbProcessName);
  const markCompacts =
    (await server.markCompacts().catch(() => Number.NaN)) - (await (markCompactsBefore ?? NaN));
  const window = measured(options.url, start, finished, background, {
    requests: result.requests,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: 0,
    statusCodes: result.statusCodes,
    bytes: result.bytes,
    latencies: Float64Array.from(result.latencies),
  });
  return {
    ...window,
    clientCpuSec: result.cpuSec,
    generatorStallMs: result.stallMs,
    serverMarkCompacts: markCompacts,
    errorKinds: result.errorKinds,
  };
}

/** An open-loop window's errors by kind, in words (`3 × ECONNREFUSED: …; …`); '' for none kept. */
export function errorKindWords(window: Pick<Window, 'errorKinds'>): string {
  return Object.entries(window.errorKinds ?? {})
    .map(([kind, count]) => `${count} × ${kind}`)
    .join('; ');
}

function sumOrNull(values: Array<number | null>): number | null {
  return values.some((v) => v === null) ? null : values.reduce<number>((a, b) => a + (b ?? 0), 0);
}

/** One measurement from the windows of one probe. */
export function combine(
  label: string,
  backend: string,
  url: string,
  windows: Window[],
): Measurement {
  const wallSec = windows.reduce((a, w) => a + w.wallSec, 0);
  const requests = windows.reduce((a, w) => a + w.requests, 0);
  const all = new Float64Array(windows.reduce((a, w) => a + w.latencies.length, 0));
  let offset = 0;
  for (const w of windows) {
    all.set(w.latencies, offset);
    offset += w.latencies.length;
  }
  const sorted = all.sort();
  const statusCodes: Record<string, number> = {};
  for (const w of windows) {
    for (const [code, count] of Object.entries(w.statusCodes)) {
      statusCodes[code] = (statusCodes[code] ?? 0) + count;
    }
  }
  const serverCpu = sumOrNull(windows.map((w) => w.serverCpuSec));
  const dbCpu = sumOrNull(windows.map((w) => w.dbCpuSec));
  const clientCpu = windows.reduce((a, w) => a + w.clientCpuSec, 0);
  const busy = sumOrNull(windows.map((w) => w.systemBusy));
  const total = sumOrNull(windows.map((w) => w.systemTotal));
  const serverCpuPct = serverCpu === null ? null : (serverCpu / wallSec) * 100;
  const dbCpuPct = dbCpu === null ? null : (dbCpu / wallSec) * 100;
  const clientCpuPct = (clientCpu / wallSec) * 100;
  const systemCpuPct = busy !== null && total !== null && total > 0 ? (busy / total) * 100 : null;
  const backgrounds = windows.map((w) => w.backgroundCpuPct).filter((v): v is number => v !== null);
  return {
    label,
    backend,
    url,
    durationSec: wallSec,
    windowRps: windows.map((w) => w.requests / w.wallSec),
    requests,
    rps: requests / wallSec,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted.length > 0 ? sorted[sorted.length - 1] : Number.NaN,
    non2xx: windows.reduce((a, w) => a + w.non2xx, 0),
    errors: windows.reduce((a, w) => a + w.errors, 0),
    timeouts: windows.reduce((a, w) => a + w.timeouts, 0),
    statusCodes,
    bytesPerResponse: requests > 0 ? windows.reduce((a, w) => a + w.bytes, 0) / requests : 0,
    serverCpuPct,
    serverCpuUsPerRequest:
      serverCpu === null || requests === 0 ? null : (serverCpu / requests) * 1e6,
    dbCpuPct,
    systemCpuPct,
    clientCpuPct,
    otherCpuPct:
      systemCpuPct === null || serverCpuPct === null
        ? null
        : Math.max(0, systemCpuPct * cpus().length - serverCpuPct - clientCpuPct - (dbCpuPct ?? 0)),
    backgroundCpuPct: backgrounds.length > 0 ? Math.max(...backgrounds) : null,
  };
}

/** Another process's load on the machine (percent of one core) that voids a comparison. */
export const DISTURBED_PCT = 30;

/** A window during or just before which other processes took a noticeable share of the CPU. */
export function windowDisturbed(w: Window): boolean {
  const other =
    w.systemBusy !== null && w.systemTotal !== null && w.systemTotal > 0 && w.serverCpuSec !== null
      ? (w.systemBusy / w.systemTotal) * 100 * cpus().length -
        ((w.serverCpuSec + w.clientCpuSec + (w.dbCpuSec ?? 0)) / w.wallSec) * 100
      : 0;
  return other > DISTURBED_PCT || (w.backgroundCpuPct ?? 0) > DISTURBED_PCT;
}

export function isDisturbed(m: Measurement): boolean {
  return (m.otherCpuPct ?? 0) > DISTURBED_PCT || (m.backgroundCpuPct ?? 0) > DISTURBED_PCT;
}

export function isValid(m: Measurement): boolean {
  return m.requests > 0 && m.non2xx === 0 && m.errors === 0 && m.timeouts === 0;
}
