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
 * This thread at a low CPU priority (nice 10: about a tenth of a CPU against one busy thread of
 * normal priority): on Linux a thread's nice value is its own, so code that runs to its cap takes
 * little of the time the process's deliveries need, while runs still get a CPU on a busy machine.
 * Elsewhere (no /proc/thread-self) it keeps the process's.
 */
const LOW_PRIORITY = 10;
try {
  const tid = Number(readlinkSync('/proc/thread-self').split('/').at(-1));
  setPriority(tid, LOW_PRIORITY);
} catch {
  // Not Linux: runs stay bounded by their caps and turns alone.
}
const engine = new SandboxEngine(await sandboxModule());
port.on('message', ({ requests }: SandboxBatch) => {
  const answers = requests.map((request): SandboxResponse => {
    try {
      if (request.op === 'check') {
        return { id: request.id, answer: engine.check(request.code), ms: 0 };
      }
      const answer = engine.run(request.code, request.input, request.nowMs);
      return { id: request.id, answer, ms: engine.lastRunMs };
    } catch (error) {
      // A fault of the engine's own, never the code's: this request fails, the thread serves on.
      const answer = { ok: false as const, error: `the sandbox failed: ${error}`, line: null };
      return { id: request.id, answer, ms: 0 };
    }
  });
  port.postMessage({ answers } satisfies SandboxAnswers);
});
port.postMessage({ ready: true });
