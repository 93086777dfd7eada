/**
 * The start-up rows of `npm run bench`: how long a `tourops` process takes from spawn to its
 * work, as the compiled sources run it (bin/tourops.js, bin/compiled.js) and as the sources run
 * through tsx (bench/sources-cli.ts, what bin/tourops.js did before). Every run is a new process
 * on a new SQLite data directory; the rows alternate, and each reports the median of its runs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from './measure.ts';
import { freePort, REPO_ROOT } from './processes.ts';

export interface StartupResult {
  scenario: string;
  /** Median ms from spawn to the end of the work, each way. */
  compiledMs: number;
  tsxMs: number;
  runs: number;
}

const WAYS = {
  compiled: ['bin/tourops.js'],
  tsx: ['--import', 'tsx', 'bench/sources-cli.ts'],
} as const;

interface Scenario {
  name: string;
  args: string[];
  /** Serving: done once GET /readyz answers 200, then the process is stopped. */
  serves?: boolean;
}

const SCENARIOS: Scenario[] = [
  { name: '`tourops --help`', args: ['--help'] },
  { name: '`tourops migrate`, a new SQLite database', args: ['migrate'] },
  {
    name: '`tourops serve --no-worker` until `/readyz` answers, a new SQLite database',
    args: ['serve', '--no-worker'],
    serves: true,
  },
];

/** One process from spawn to the end of its work, in ms. */
async function once(way: keyof typeof WAYS, scenario: Scenario): Promise<number> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tourops-bench-startup-'));
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, [...WAYS[way], ...scenario.args], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    if (scenario.serves) {
      for (;;) {
        const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (response) => response.status === 200,
          () => false,
        );
        if (ready) return performance.now() - started;
        if (child.exitCode !== null) throw new Error(`serve exited: ${stderr}`);
        if (performance.now() - started > 60_000) throw new Error('serve not ready in 60 s');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    const code = await exited;
    if (code !== 0) throw new Error(`${scenario.args.join(' ')} exited with ${code}: ${stderr}`);
    return performance.now() - started;
  } finally {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function benchStartup(runs: number): Promise<StartupResult[]> {
  // The first compiled start after a change builds; this one is not measured.
  await once('compiled', SCENARIOS[0]);
  const results: StartupResult[] = [];
  for (const scenario of SCENARIOS) {
    const times = { compiled: [] as number[], tsx: [] as number[] };
    for (let run = 0; run < runs; run++) {
      for (const way of ['compiled', 'tsx'] as const) times[way].push(await once(way, scenario));
    }
    results.push({
      scenario: scenario.name,
      compiledMs: median(times.compiled),
      tsxMs: median(times.tsx),
      runs,
    });
  }
  return results;
}
