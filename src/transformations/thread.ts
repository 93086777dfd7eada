import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { SandboxEngine, sandboxModule } from './engine.ts';
import type { SandboxAnswers, SandboxBatch, SandboxResponse } from './runner.ts';

/**
 * The sandbox's thread: one engine, answering the runner's batches of requests, each run in turn.
 * Its runs take their time here, never on the event loop of the process that sends deliveries.
 */
const port = parentPort;
if (port === null) throw new Error('transformations/thread runs as a worker thread');

/**
 * This thread at the lowest CPU priority: on Linux a thread's nice value is its own, so code that
 * runs to its cap takes the time the process's other work leaves, not a core from it. Elsewhere
 * (no /proc/thread-self) it keeps the process's.
 */
const LOWEST_PRIORITY = 19;
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').at(-1));
  setPriority(tid, LOWEST_PRIORITY);
} catch {
  // Not Linux: runs stay bounded by their caps and turns alone.
}
const engine = new SandboxEngine(await sandboxModule());
port.on('message', ({ requests }: SandboxBatch) => {
  const answers = requests.map((request): SandboxResponse => {
    if (request.op === 'check')
      return { id: request.id, answer: engine.check(request.code), ms: 0 };
    const answer = engine.run(request.code, request.input, request.nowMs);
    return { id: request.id, answer, ms: engine.lastRunMs };
  });
  port.postMessage({ answers } satisfies SandboxAnswers);
});
port.postMessage({ ready: true });
