import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { usage } from './options.ts';
import { onLoopback } from './processes.ts';

/**
 * The alternation both A/B benchmarks share (`bench:ab`, `bench:ab-drain`): window pairs A B, B A,
 * …, each window's CPU a unit of work and rate printed, then the medians and each pair's ratio B/A
 * with their geometric mean; returns the medians of CPU.
 */
export type Checkout = 'A' | 'B';

export interface WindowResult {
  /** CPU µs a unit of work (a request, a delivery). */
  cpuUs: number;
  /** Units of work a second. */
  rate: number;
  /** Where the CPU went (see cpuSplitWords), printed after the window's line. */
  split?: string;
  /** An open loop's latency (from each request's scheduled time), and whether others took CPU. */
  tail?: { p50Ms: number; p99Ms: number; disturbed: boolean };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x: number) => x.toFixed(0);

export async function runPairs(
  pairs: number,
  units: { rate: string; cpu: string },
  window: (checkout: Checkout, pair: number) => Promise<WindowResult>,
): Promise<{ cpuA: number; cpuB: number }> {
  const cpu: Record<Checkout, number[]> = { A: [], B: [] };
  const rates: Record<Checkout, number[]> = { A: [], B: [] };
  const p99s: Record<Checkout, number[]> = { A: [], B: [] };
  for (let pair = 0; pair < pairs; pair++) {
    const order: Checkout[] = pair % 2 === 0 ? ['A', 'B'] : ['B', 'A'];
    for (const label of order) {
      const { cpuUs, rate, split, tail } = await window(label, pair + 1);
      cpu[label].push(cpuUs);
      rates[label].push(rate);
      if (tail) p99s[label].push(tail.p99Ms);
      const latency =
        tail &&
        `; p50 ${tail.p50Ms.toFixed(2)} ms, p99 ${tail.p99Ms.toFixed(2)} ms` +
          (tail.disturbed ? ' (disturbed: other processes took CPU)' : '');
      console.log(
        `pair ${pair + 1} ${label}: ${fmt(rate)} ${units.rate}, ${fmt(cpuUs)} ${units.cpu}` +
          (latency ?? '') +
          (split === undefined ? '' : `; ${split}`),
      );
    }
  }
  const ratios = cpu.B.map((b, i) => b / cpu.A[i]);
  console.log(
    `\n${units.cpu}, median: A ${fmt(median(cpu.A))}, B ${fmt(median(cpu.B))}; ` +
      `${units.rate}, median: A ${fmt(median(rates.A))}, B ${fmt(median(rates.B))}\n` +
      `B/A CPU per pair: ${pairRatios(ratios)}; B cheaper in ${ratios.filter((r) => r < 1).length} of ${ratios.length}`,
  );
  if (p99s.B.length > 0) {
    const tails = p99s.B.map((b, i) => b / p99s.A[i]);
    console.log(
      `p99 ms, median: A ${median(p99s.A).toFixed(2)}, B ${median(p99s.B).toFixed(2)}\n` +
        `B/A p99 per pair: ${pairRatios(tails)}; B lower in ${tails.filter((r) => r < 1).length} of ${tails.length}`,
    );
  }
  return { cpuA: median(cpu.A), cpuB: median(cpu.B) };
}

/** Each pair's ratio, and their geometric mean. */
function pairRatios(ratios: number[]): string {
  const geomean = Math.exp(ratios.reduce((sum, r) => sum + Math.log(r), 0) / ratios.length);
  return `${ratios.map((r) => r.toFixed(2)).join(' ')}; geometric mean ${geomean.toFixed(3)}`;
}

/** --backend and --pg-url, checked (`--help` prints `text` and exits). */
export function backendOptions(
  name: string,
  text: string,
  args: { backend: string; 'pg-url': string; help: boolean },
) {
  if (args.help) {
    process.stdout.write(text);
    process.exit(0);
  }
  const { usageError, integer } = usage(name, text);
  const backend = args.backend;
  if (backend !== 'sqlite' && backend !== 'postgres') {
    usageError('--backend must be sqlite or postgres');
  }
  const pgUrl = args['pg-url'];
  if (!onLoopback(pgUrl)) {
    usageError('--pg-url must be a postgres:// URL on 127.0.0.1 (loopback only)');
  }
  return { backend, pgUrl, usageError, integer };
}

/** The options both A/B benchmarks take, checked (see backendOptions). */
export function checkoutOptions(
  name: string,
  text: string,
  args: { base?: string; backend: string; pairs: string; 'pg-url': string; help: boolean },
) {
  const { backend, pgUrl, usageError, integer } = backendOptions(name, text, args);
  const base = resolve(args.base ?? usageError('--base is required'));
  return { base, backend, pairs: integer('pairs', args.pairs, 1, 50), pgUrl, usageError, integer };
}

/**
 * The share of a run's work done before its CPU is counted: the first part pays for V8 compiling
 * the hot paths (on its helper threads), a cost a long-running process pays once.
 */
export const WARM_SHARE = 0.25;

/**
 * A database of the benchmark's own for an API to migrate and use: on PostgreSQL a new database on
 * `pgUrl`, always a new DATA_DIR and SECRET_KEY. `env` holds them; `drop` removes both.
 */
export async function scratchDatabase(
  backend: string,
  pgUrl: string,
  prefix: string,
): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const env: Record<string, string> = {
    SECRET_KEY: randomBytes(32).toString('hex'),
    DATA_DIR: dataDir,
  };
  const removeDir = async () => rmSync(dataDir, { recursive: true, force: true });
  if (backend !== 'postgres') return { env, drop: removeDir };
  const name = `${prefix.replaceAll('-', '_')}_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(pgUrl);
  url.pathname = `/${name}`;
  env.DATABASE_URL = url.toString();
  return {
    env,
    drop: async () => {
      await removeDir();
      await admin.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
      await admin.end();
    },
  };
}
