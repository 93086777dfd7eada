import { Worker } from 'node:worker_threads';
import { destinationKind } from '../domain/destinations.ts';
import {
  boundedMessage,
  checkedResult,
  codeFault,
  TRANSFORMATION_LIMITS,
  type TransformationInput,
  type TransformationOutcome,
} from '../domain/transformation.ts';
import { parseStoredJson } from '../lib/json.ts';
import type { CompileAnswer, EngineAnswer } from './engine.ts';

/** What the runner asks the sandbox's thread, before it is numbered. */
type Unsent =
  | { op: 'check'; code: string }
  | { op: 'run'; code: string; input: string; nowMs: number };

/** A request to the sandbox's thread, `id` naming its answer. */
export type SandboxRequest = Unsent & { id: number };

/** The thread's answer to request `id`. */
export interface SandboxResponse {
  id: number;
  answer: CompileAnswer | EngineAnswer;
}

/**
 * Past its run's time cap by this much, the thread is taken for hung: QuickJS's interrupt is
 * polled between bytecodes, so one long native call (a built-in over a huge sparse array) can
 * outrun the cap. The thread is stopped and a new one started for the next request.
 */
const HUNG_AFTER_MS = TRANSFORMATION_LIMITS.runMs + 400;

/** Requests waiting for the thread, per queue key, at most; past it a run fails at once. */
const QUEUED_PER_KEY = 1_000;

interface Queued {
  request: Unsent;
  resolve: (answer: CompileAnswer | EngineAnswer) => void;
}

/** Where the sandbox's thread starts: the bin script that loads its compiled module. */
const THREAD_URL = new URL('../../bin/sandbox-thread.js', import.meta.url);

/**
 * The host's side of the sandbox: one thread (thread.ts) that compiles and runs transformations
 * one at a time, so that a run's cost is never paid on this process's event loop. Requests wait in
 * a queue per key (a tenant) and are taken in turn from each key, so a tenant whose code always
 * runs to its time cap delays another tenant's runs by at most one run, whatever its backlog. A
 * thread that dies or hangs fails the requests it held and is started again on the next.
 */
export class TransformationRunner {
  private thread: Worker | null = null;
  private ready: Promise<Worker> | null = null;
  private readonly queues = new Map<string, Queued[]>();
  private running: { id: number; queued: Queued; timer: NodeJS.Timeout | null } | null = null;
  private nextId = 1;
  private closing = false;

  /** Whether `code` compiles and defines `handler`: the compiler's message and line when not. */
  check(code: string): Promise<CompileAnswer> {
    return this.enqueue('check', { op: 'check', code }) as Promise<CompileAnswer>;
  }

  /** Why `code` cannot be a transformation (its size, the compiler's message, no handler), or null. */
  async faultOf(code: string): Promise<string | null> {
    const fault = codeFault(code);
    if (fault !== null) return fault;
    const compiled = await this.check(code);
    return compiled.ok ? null : compiled.error;
  }

  /**
   * One run of `code` over `input`, its clock at `nowMs` (the delivery's `created`), checked as a
   * delivery takes it (see checkedResult). `key`: whose queue it waits in.
   */
  async transform(
    key: string,
    code: string,
    input: TransformationInput,
    nowMs: number,
    destination: { https: boolean; withAuth: boolean },
  ): Promise<TransformationOutcome> {
    const answer = (await this.enqueue(key, {
      op: 'run',
      code,
      input: JSON.stringify(input),
      nowMs,
    })) as EngineAnswer;
    if (!answer.ok) return answer;
    if (Buffer.byteLength(answer.json, 'utf8') > TRANSFORMATION_LIMITS.resultBytes) {
      return {
        ok: false,
        error: `handler returned more than ${TRANSFORMATION_LIMITS.resultBytes} bytes of JSON`,
      };
    }
    return checkedResult(JSON.parse(answer.json), input, destination);
  }

  /** Stops the thread; requests still waiting fail (a later one starts it again). */
  async close(): Promise<void> {
    this.closing = true;
    this.failAll('the sandbox closed');
    this.closing = false;
    const thread = this.thread;
    this.thread = null;
    this.ready = null;
    if (thread !== null) await thread.terminate();
  }

  private enqueue(key: string, request: Unsent): Promise<CompileAnswer | EngineAnswer> {
    const queue = this.queues.get(key) ?? [];
    if (queue.length >= QUEUED_PER_KEY) {
      return Promise.resolve(failed('too many transformations waiting for the sandbox'));
    }
    this.queues.set(key, queue);
    return new Promise((resolve) => {
      queue.push({ request, resolve });
      this.pump();
    });
  }

  /** Sends the next request, the first of the key least recently served, when the thread is free. */
  private pump(): void {
    if (this.running !== null || this.closing) return;
    const first = this.queues.entries().next();
    if (first.done) {
      this.thread?.unref();
      return;
    }
    const [key, queue] = first.value;
    const queued = queue.shift() as Queued;
    // The key goes to the back of the turn; an emptied one leaves it.
    this.queues.delete(key);
    if (queue.length > 0) this.queues.set(key, queue);
    const id = this.nextId++;
    this.running = { id, queued, timer: null };
    this.started()
      .then((thread) => {
        if (this.running?.id !== id) return;
        thread.ref();
        // From the send: a thread's start (its WebAssembly compiled) is not the run's time.
        this.running.timer = setTimeout(() => this.hung(id), HUNG_AFTER_MS);
        thread.postMessage({ ...queued.request, id } as SandboxRequest);
      })
      .catch((error: unknown) => this.settle(id, failed(`the sandbox did not start: ${error}`)));
  }

  private settle(id: number, answer: CompileAnswer | EngineAnswer): void {
    if (this.running?.id !== id) return;
    if (this.running.timer !== null) clearTimeout(this.running.timer);
    const { queued } = this.running;
    this.running = null;
    queued.resolve(answer);
    this.pump();
  }

  private hung(id: number): void {
    if (this.running?.id !== id) return;
    this.restart();
    this.settle(
      id,
      failed(
        `ran longer than ${TRANSFORMATION_LIMITS.runMs} ms (the time cap of one run): stopped after ${HUNG_AFTER_MS} ms in one call`,
      ),
    );
  }

  /** The thread, started and ready (its WebAssembly compiled) when none is. */
  private started(): Promise<Worker> {
    if (this.ready !== null) return this.ready;
    // None of the process's preloads (tsx, tracing hooks, a bench agent): the thread runs its own
    // module and nothing else.
    const thread = new Worker(THREAD_URL, { execArgv: [] });
    this.thread = thread;
    this.ready = new Promise<Worker>((resolve, reject) => {
      thread.once('error', reject);
      thread.once('message', () => resolve(thread));
    });
    thread.on('message', (message: SandboxResponse | { ready: true }) => {
      if ('id' in message) this.settle(message.id, message.answer);
    });
    thread.on('error', (error) => {
      if (this.thread !== thread) return;
      this.restart();
      if (this.running !== null) {
        this.settle(this.running.id, failed(`the sandbox failed: ${error.message}`));
      }
    });
    thread.on('exit', () => {
      if (this.thread !== thread) return;
      this.restart();
      if (this.running !== null) this.settle(this.running.id, failed('the sandbox stopped'));
    });
    return this.ready;
  }

  /** Drops the thread (stopped if still running); the next request starts another. */
  private restart(): void {
    const thread = this.thread;
    this.thread = null;
    this.ready = null;
    if (thread !== null) void thread.terminate();
  }

  private failAll(error: string): void {
    if (this.running !== null) this.settle(this.running.id, failed(error));
    for (const queue of this.queues.values()) {
      for (const queued of queue) queued.resolve(failed(error));
    }
    this.queues.clear();
  }
}

function failed(error: string): { ok: false; error: string; line: null } {
  return { ok: false, error: boundedMessage(error), line: null };
}

/** What a transformation is run for: the subscription's side of a delivery. */
export interface TransformedSubscription {
  tenantId: string;
  /** As stored: a broker URL's password masked. */
  url: string;
  /** Receiver authentication as reads show it (JSON), or null. */
  receiverAuth: string | null;
  transformation: string | null;
}

/**
 * What `subscription`'s transformation makes of `body`, the request of an event of `type` that
 * it would get at `created` (epoch seconds, the sandbox's clock): the worker's attempt and the
 * dry run both call this, so that the dry run answers what the delivery sends.
 */
export function transformedRequest(
  runner: TransformationRunner,
  subscription: TransformedSubscription,
  type: string,
  body: string,
  created: number,
): Promise<TransformationOutcome> {
  const shown =
    subscription.receiverAuth === null
      ? null
      : parseStoredJson<{ auth?: unknown }>(subscription.receiverAuth);
  return runner.transform(
    subscription.tenantId,
    subscription.transformation ?? '',
    { type, payload: JSON.parse(body), url: subscription.url, headers: {} },
    created * 1000,
    {
      https: destinationKind(subscription.url) === 'https',
      withAuth: (shown?.auth ?? null) !== null,
    },
  );
}
