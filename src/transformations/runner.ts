import { Worker } from 'node:worker_threads';
import { destinationKind } from '../domain/destinations.ts';
import {
  boundedMessage,
  checkedResult,
  codeFault,
  type Destination,
  TRANSFORMATION_LIMITS,
  type TransformationOutcome,
  transformationInputText,
} from '../domain/transformation.ts';
import { parseStoredJson } from '../lib/json.ts';
import type { CompileAnswer, EngineAnswer } from './engine.ts';

/** What the runner asks the sandbox's thread, before it is numbered. */
type Unsent =
  | { op: 'check'; code: string }
  | { op: 'run'; code: string; input: string; nowMs: number };

/** A request to the sandbox's thread, `id` naming its answer. */
type SandboxRequest = Unsent & { id: number };

/** The thread's answer to request `id`, and how long its run took there (compiling aside). */
export interface SandboxResponse {
  id: number;
  answer: CompileAnswer | EngineAnswer;
  ms: number;
}

/** What goes to the thread in one message, and what comes back. */
export interface SandboxBatch {
  requests: SandboxRequest[];
}
export interface SandboxAnswers {
  answers: SandboxResponse[];
}

/**
 * Past its runs' time caps by this much, a batch is taken for hung: QuickJS's interrupt is polled
 * between bytecodes, so one long native call (a search over a long string) can outrun the cap.
 * The thread is stopped and a new one started. Wall-clock time, with room for a thread that
 * waited for a CPU (its caps count CPU time: see afterRunTime).
 */
const HUNG_MARGIN_MS = 2_000;

/**
 * Requests sent to the thread in one message, at most: a message each way costs more than a
 * trivial run, so runs go in batches. Only keys whose runs are quick share one (see SLOW_RUN_MS).
 */
const BATCH_SIZE = 32;

/** A run longer than this marks its key slow: its next runs go alone, between the batches. */
const SLOW_RUN_MS = 10;

/**
 * After a run that reached its time cap, its key rests this many times the cap: its runs fail at
 * once meanwhile, without running, so code that always runs to its cap has at most a quarter of
 * the thread's time, however many of its deliveries retry.
 */
const REST_FACTOR = 3;

/** Requests waiting for the thread, per queue key, at most; past it a run fails at once. */
const QUEUED_PER_KEY = 1_000;

interface Queued {
  key: string;
  request: Unsent;
  resolve: (answer: CompileAnswer | EngineAnswer) => void;
}

/** Where the sandbox's thread starts: the bin script that loads its compiled module. */
const THREAD_URL = new URL('../../bin/sandbox-thread.js', import.meta.url);

/**
 * The host's side of the sandbox: one thread (thread.ts) that compiles and runs transformations,
 * so that a run's cost is never paid on this process's event loop. Requests wait in a queue per
 * key (a tenant) and are taken in turn from each key. Quick keys' runs go together, up to
 * BATCH_SIZE a message; a key whose last run was slow (or ran to its cap) goes alone, taking turns
 * with the batches, so a tenant whose code always runs to its cap delays another tenant's runs by
 * one run at most, whatever its backlog; after such a run its key rests (REST_FACTOR). A thread that dies fails the requests it held; one that
 * hangs on a batch has the batch's requests sent again one by one (the one that hangs alone is the
 * one that fails); either way the next request starts another thread.
 */
export class TransformationRunner {
  private thread: Worker | null = null;
  private ready: Promise<Worker> | null = null;
  private readonly queues = new Map<string, Queued[]>();
  /** Keys whose last run was slow: their runs go alone. */
  private readonly slow = new Set<string>();
  /** Keys resting after a run to the cap, until when (performance.now()); see REST_FACTOR. */
  private readonly resting = new Map<string, number>();
  private running: { id: number; batch: Map<number, Queued>; timer: NodeJS.Timeout | null } | null =
    null;
  private nextId = 1;
  private closing = false;

  /**
   * Whether `code` compiles and defines `handler`: the compiler's message and line when not.
   * `key`: whose queue it waits in (the tenant's, as for its runs).
   */
  check(key: string, code: string): Promise<CompileAnswer> {
    return this.enqueue(key, { op: 'check', code }) as Promise<CompileAnswer>;
  }

  /** Why `code` cannot be a transformation (its size, the compiler's message, no handler), or null. */
  async faultOf(key: string, code: string): Promise<string | null> {
    const fault = codeFault(code);
    if (fault !== null) return fault;
    const compiled = await this.check(key, code);
    return compiled.ok ? null : compiled.error;
  }

  /**
   * One run of `code` over `input` (`body`: the JSON text of the body), its clock at `nowMs` (the
   * delivery's `created`), checked as a delivery takes it (see checkedResult). `key`: whose queue
   * it waits in (the tenant's).
   */
  async transform(
    key: string,
    code: string,
    input: { type: string; url: string; body: string },
    nowMs: number,
    destination: Destination,
  ): Promise<TransformationOutcome> {
    const answer = (await this.enqueue(key, {
      op: 'run',
      code,
      input: transformationInputText(input),
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
    const rest = this.restOf(key);
    if (rest !== null) return Promise.resolve(rest);
    const queue = this.queues.get(key) ?? [];
    if (queue.length >= QUEUED_PER_KEY) {
      return Promise.resolve(failed('too many transformations waiting for the sandbox'));
    }
    this.queues.set(key, queue);
    return new Promise((resolve) => {
      queue.push({ key, request, resolve });
      this.pump();
    });
  }

  /** The first request of `key`; the key goes to the back of the turn (an emptied one leaves). */
  private take(key: string): Queued {
    const queue = this.queues.get(key) as Queued[];
    const queued = queue.shift() as Queued;
    this.queues.delete(key);
    if (queue.length > 0) this.queues.set(key, queue);
    return queued;
  }

  /** The answer of a request of `key` while it rests (see REST_FACTOR), or null. */
  private restOf(key: string): ReturnType<typeof failed> | null {
    const until = this.resting.get(key);
    if (until === undefined) return null;
    const left = until - performance.now();
    if (left <= 0) {
      this.resting.delete(key);
      return null;
    }
    return failed(
      `not run: this code's runs reach the time cap of ${TRANSFORMATION_LIMITS.runMs} ms, and such code runs at most a quarter of the time (again in ${Math.ceil(left)} ms)`,
    );
  }

  /** The first key of the turn not resting; the resting ones before it answered, unrun. */
  private firstAwake(): string | undefined {
    for (;;) {
      const first = this.queues.keys().next().value as string | undefined;
      if (first === undefined) return undefined;
      const rest = this.restOf(first);
      if (rest === null) return first;
      for (const queued of this.queues.get(first) ?? []) queued.resolve(rest);
      this.queues.delete(first);
    }
  }

  /**
   * The next batch: the first key's request alone when that key is slow, else one request of each
   * quick key in turn, round after round, up to BATCH_SIZE. A resting key's requests are answered
   * on the way, unrun.
   */
  private nextBatch(): Queued[] {
    const first = this.firstAwake();
    if (first === undefined) return [];
    if (this.slow.has(first)) return [this.take(first)];
    const batch: Queued[] = [];
    while (batch.length < BATCH_SIZE) {
      const quick = [...this.queues.keys()].filter((key) => !this.slow.has(key));
      if (quick.length === 0) break;
      for (const key of quick.slice(0, BATCH_SIZE - batch.length)) batch.push(this.take(key));
    }
    return batch;
  }

  /** Sends the next batch when the thread is free. */
  private pump(): void {
    if (this.running !== null || this.closing) return;
    const next = this.nextBatch();
    if (next.length === 0) {
      this.thread?.unref();
      return;
    }
    const batch = new Map(next.map((queued) => [this.nextId++, queued]));
    const id = this.nextId++;
    this.running = { id, batch, timer: null };
    this.started()
      .then((thread) => {
        if (this.running?.id !== id) return;
        thread.ref();
        // From the send: a thread's start (its WebAssembly compiled) is not the runs' time.
        const within = batch.size * TRANSFORMATION_LIMITS.runMs + HUNG_MARGIN_MS;
        this.running.timer = setTimeout(() => this.hung(id), within);
        const requests = [...batch].map(([n, queued]) => ({ ...queued.request, id: n }));
        thread.postMessage({ requests } as SandboxBatch);
      })
      .catch((error: unknown) => this.end(id, failed(`the sandbox did not start: ${error}`)));
  }

  /** The batch's answers: each request settled, its key's speed noted, the next batch sent. */
  private answered(answers: readonly SandboxResponse[]): void {
    const running = this.running;
    if (running === null) return;
    for (const { id, answer, ms } of answers) {
      const queued = running.batch.get(id);
      if (queued === undefined) continue;
      running.batch.delete(id);
      if (ms > SLOW_RUN_MS) this.slow.add(queued.key);
      else this.slow.delete(queued.key);
      if (ms >= TRANSFORMATION_LIMITS.runMs) {
        this.resting.set(queued.key, performance.now() + REST_FACTOR * TRANSFORMATION_LIMITS.runMs);
      }
      queued.resolve(answer);
    }
    if (running.batch.size === 0) this.end(running.id, null);
  }

  /** Ends batch `id`: what is left of it fails with `answer` (none: nothing is left). */
  private end(id: number, answer: CompileAnswer | EngineAnswer | null): void {
    const running = this.running;
    if (running?.id !== id) return;
    if (running.timer !== null) clearTimeout(running.timer);
    this.running = null;
    if (answer !== null) for (const queued of running.batch.values()) queued.resolve(answer);
    this.pump();
  }

  /**
   * A batch past its time: the thread is stopped. A run alone fails; a batch's requests go back
   * to the front of their queues, their keys slow, so each runs alone and only the one that
   * hangs again fails.
   */
  private hung(id: number): void {
    const running = this.running;
    if (running?.id !== id) return;
    this.restart();
    if (running.batch.size > 1) {
      for (const queued of [...running.batch.values()].reverse()) {
        this.slow.add(queued.key);
        const queue = this.queues.get(queued.key) ?? [];
        queue.unshift(queued);
        this.queues.delete(queued.key);
        this.queues.set(queued.key, queue);
      }
      running.batch.clear();
      this.end(id, null);
      return;
    }
    const stoppedAfter = TRANSFORMATION_LIMITS.runMs + HUNG_MARGIN_MS;
    for (const queued of running.batch.values()) {
      this.slow.add(queued.key);
      this.resting.set(queued.key, performance.now() + REST_FACTOR * stoppedAfter);
    }
    this.end(
      id,
      failed(
        `ran longer than ${TRANSFORMATION_LIMITS.runMs} ms (the time cap of one run): stopped after ${stoppedAfter} ms in one call`,
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
    thread.on('message', (message: SandboxAnswers | { ready: true }) => {
      if ('answers' in message && this.thread === thread) this.answered(message.answers);
    });
    thread.on('error', (error) => {
      if (this.thread !== thread) return;
      this.restart();
      if (this.running !== null) {
        this.end(this.running.id, failed(`the sandbox failed: ${error.message}`));
      }
    });
    thread.on('exit', () => {
      if (this.thread !== thread) return;
      this.restart();
      if (this.running !== null) this.end(this.running.id, failed('the sandbox stopped'));
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
    if (this.running !== null) this.end(this.running.id, failed(error));
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
  /** Its secrets, sealed; null for none. */
  receiverSecrets: string | null;
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
  const https = destinationKind(subscription.url) === 'https';
  const shown =
    subscription.receiverAuth === null
      ? null
      : parseStoredJson<{ auth?: unknown }>(subscription.receiverAuth);
  return runner.transform(
    subscription.tenantId,
    subscription.transformation ?? '',
    { type, url: subscription.url, body },
    created * 1000,
    {
      https,
      withAuth: (shown?.auth ?? null) !== null,
      secretsOrigin:
        https && subscription.receiverSecrets !== null ? new URL(subscription.url).origin : null,
    },
  );
}
