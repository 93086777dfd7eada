import { parentPort } from 'node:worker_threads';
import { SandboxEngine, sandboxModule } from './engine.ts';
import type { SandboxRequest, SandboxResponse } from './runner.ts';

/**
 * The sandbox's thread: one engine, answering the runner's requests one at a time. Its runs
 * take their time here, never on the event loop of the process that sends deliveries.
 */
const port = parentPort;
if (port === null) throw new Error('transformations/thread runs as a worker thread');
const engine = new SandboxEngine(await sandboxModule());
port.on('message', (request: SandboxRequest) => {
  const answer =
    request.op === 'check'
      ? engine.check(request.code)
      : engine.run(request.code, request.input, request.nowMs);
  port.postMessage({ id: request.id, answer } satisfies SandboxResponse);
});
port.postMessage({ ready: true });
