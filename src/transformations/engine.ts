import { openSync, readSync } from 'node:fs';
import releaseSync from '@jitl/quickjs-wasmfile-release-sync';
import type {
  QuickJSContext,
  QuickJSHandle,
  QuickJSRuntime,
  QuickJSSyncVariant,
  QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import { newQuickJSWASMModuleFromVariant, newVariant } from 'quickjs-emscripten-core';
import { boundedMessage, TRANSFORMATION_LIMITS } from '../domain/transformation.ts';

/**
 * Transformations run in QuickJS compiled to WebAssembly (quickjs-emscripten): an interpreter with
 * no host object in reach, so code sees the language's built-ins and nothing else (no require,
 * no process, no fetch, no timers, no I/O). Each code version gets a runtime of its own, with a
 * heap and a stack cap, compiled once and kept (the most recent COMPILED_KEPT); every run has a
 * time cap, enforced by QuickJS's interrupt hook. The built-ins are frozen before the code runs
 * and the code's top level runs afresh each run, so no run leaves anything to the next: a dry run
 * and a delivery of the same webhook at the same second give the same answer. The clock reads
 * the delivery's own time (`created`) and Math.random is refused, so runs are repeatable.
 *
 * This is synchronous work: it runs on the sandbox's own thread (see thread.ts, runner.ts).
 */

/** Code versions kept compiled; a runtime holds the compiled code and its frozen built-ins. */
const COMPILED_KEPT = 64;

/** The name errors' frames carry; lines are the code's own (the wrapper adds none). */
const FILE_NAME = 'transformation.js';

/**
 * Evaluated once per runtime, before the code: fixes the clock, refuses randomness, drops what
 * only a garbage collector decides (WeakRef, FinalizationRegistry), freezes every object reachable
 * from the global object, and returns the host's two entry points, which the code cannot reach.
 */
const PRELUDE = `(function () {
  'use strict';
  const RealDate = Date;
  let now = 0;
  function FixedDate(...args) {
    if (new.target === undefined) return new RealDate(now).toString();
    return args.length === 0 ? new RealDate(now) : new RealDate(...args);
  }
  FixedDate.prototype = RealDate.prototype;
  FixedDate.now = function now_() { return now; };
  FixedDate.parse = RealDate.parse;
  FixedDate.UTC = RealDate.UTC;
  Object.defineProperty(RealDate.prototype, 'constructor', { value: FixedDate });
  globalThis.Date = FixedDate;
  Math.random = function random() {
    throw new Error('Math.random is not available: a transformation gives the same answer every run');
  };
  delete globalThis.WeakRef;
  delete globalThis.FinalizationRegistry;
  const seen = new Set();
  const freeze = (value) => {
    if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return;
    if (seen.has(value)) return;
    seen.add(value);
    Object.freeze(value);
    freeze(Object.getPrototypeOf(value));
    for (const key of Reflect.ownKeys(value)) {
      const d = Object.getOwnPropertyDescriptor(value, key);
      if ('value' in d) freeze(d.value); else { freeze(d.get); freeze(d.set); }
    }
  };
  freeze(globalThis);
  const parse = JSON.parse, stringify = JSON.stringify;
  const setNow = (ms) => { now = ms; };
  const handlerOf = (factory) => {
    const handler = factory();
    if (typeof handler !== 'function') throw new TypeError('the code defines no function handler(webhook)');
    return handler;
  };
  const run = (factory, input, limit) => {
    const out = handlerOf(factory)(parse(input));
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      throw new TypeError('handler returned a Promise: return the webhook itself (handler runs synchronously)');
    }
    const text = stringify(out);
    if (text === undefined) throw new TypeError('handler returned nothing: return the webhook');
    if (text.length > limit) throw new RangeError('handler returned more than ' + limit + ' characters of JSON');
    return text;
  };
  return { setNow, handlerOf, run };
})()`;

/**
 * The sandbox's whole WebAssembly memory, every runtime's heap within it: QuickJS's own count
 * (TRANSFORMATION_LIMITS.memoryBytes a runtime) misses some allocations (large strings, typed
 * arrays' buffers), so this is the bound that holds whatever the code allocates. A run that
 * reaches it fails as out of memory; its runtime is then dropped, which gives the memory back.
 */
export const SANDBOX_MEMORY_BYTES = 64 * 1024 * 1024;

/** WebAssembly's page: its memory grows by these. */
const WASM_PAGE_BYTES = 64 * 1024;

/** QuickJS compiled to WebAssembly, in a memory that cannot grow past SANDBOX_MEMORY_BYTES. */
export function sandboxModule(): Promise<QuickJSWASMModule> {
  const memory = new WebAssembly.Memory({
    initial: 256,
    maximum: SANDBOX_MEMORY_BYTES / WASM_PAGE_BYTES,
  });
  // Its types are CommonJS's (the default export as a namespace); imported, it is the variant.
  const base = releaseSync as unknown as QuickJSSyncVariant;
  const variant = newVariant(base, { wasmMemory: memory });
  return newQuickJSWASMModuleFromVariant(variant);
}

/** A code version compiled in its own runtime. */
interface Compiled {
  runtime: QuickJSRuntime;
  context: QuickJSContext;
  /** The host's entry points (PRELUDE's answer). */
  host: QuickJSHandle;
  /** The code, wrapped in a function that runs its top level and returns its `handler`. */
  factory: QuickJSHandle;
}

/** A run's answer: the JSON its handler returned, or why there is none. */
export type EngineAnswer = { ok: true; json: string } | { ok: false; error: string };

/** Code, compiled: fine, or the compiler's (or its top level's) message, with its line. */
export type CompileAnswer = { ok: true } | { ok: false; error: string; line: number | null };

/** An interrupt handler that never interrupts. */
const NEVER = () => false;

/** The open /proc/thread-self/schedstat of the thread the engine runs in; null where none. */
let schedstat: number | null | undefined;
const schedstatText = Buffer.alloc(64);

/**
 * This thread's CPU time in ms (Linux: /proc/thread-self/schedstat, nanoseconds on a CPU), or
 * null where there is no such file. The file stays open: read at every run's start, it is read
 * again from its start rather than opened each time.
 */
function threadCpuMs(): number | null {
  try {
    schedstat ??= openSync('/proc/thread-self/schedstat', 'r');
  } catch {
    schedstat = null;
  }
  if (schedstat === null) return null;
  const length = readSync(schedstat, schedstatText, 0, schedstatText.length, 0);
  return Number(schedstatText.toString('latin1', 0, length).split(' ')[0]) / 1e6;
}

/**
 * An interrupt handler that ends a run once it has had `capMs` of this thread's CPU time: the
 * thread runs at the lowest priority (thread.ts), so on a busy machine a run may wait for a CPU
 * longer than it runs, and a wall-clock cap would end code that did nothing wrong. The CPU time
 * is read only once the wall clock says the cap may be reached, and again no sooner than it could
 * be (where it cannot be read, the wall clock is the cap).
 */
function afterRunTime(capMs: number): () => boolean {
  const cpuAtStart = threadCpuMs();
  let checkAt = performance.now() + capMs;
  return () => {
    const now = performance.now();
    if (now < checkAt) return false;
    if (cpuAtStart === null) return true;
    const used = (threadCpuMs() ?? Number.POSITIVE_INFINITY) - cpuAtStart;
    if (used >= capMs) return true;
    checkAt = now + (capMs - used);
    return false;
  };
}

/** Faults QuickJS reports in its own words, said in ours. */
function ownWords(name: string, message: string): string {
  if (message === 'interrupted') {
    return `ran longer than ${TRANSFORMATION_LIMITS.runMs} ms (the time cap of one run)`;
  }
  if (message === 'out of memory' || message === 'string too long') {
    return `ran out of memory (${message}; a run may use ${TRANSFORMATION_LIMITS.memoryBytes / 1024 / 1024} MB)`;
  }
  if (message === 'stack overflow') return 'stack overflow: recursion too deep';
  return `${name}: ${message}`;
}

/** The line of the code a QuickJS error points at: its own, or the first frame in the code. */
function lineOf(error: Record<string, unknown>): number | null {
  if (typeof error.lineNumber === 'number') return error.lineNumber;
  const stack = typeof error.stack === 'string' ? error.stack : '';
  const frame = new RegExp(`${FILE_NAME.replace('.', '\\.')}:(\\d+)`).exec(stack);
  return frame === null ? null : Number(frame[1]);
}

/** A thrown value, as a bounded message and a line (no stack: it names nothing of ours anyway). */
function describe(thrown: unknown): { error: string; line: number | null } {
  if (typeof thrown === 'object' && thrown !== null) {
    const error = thrown as Record<string, unknown>;
    const name = typeof error.name === 'string' ? error.name : 'Error';
    const message = typeof error.message === 'string' ? error.message : JSON.stringify(thrown);
    const line = lineOf(error);
    const words = ownWords(name, message);
    return { error: boundedMessage(line === null ? words : `${words} (line ${line})`), line };
  }
  return { error: boundedMessage(`threw ${JSON.stringify(thrown) ?? String(thrown)}`), line: null };
}

export class SandboxEngine {
  /** By the code itself: a Map hashes a string faster than a digest of it, at most 64 of them. */
  private readonly compiled = new Map<string, Compiled>();
  /** How long the last run's call took, compiling aside (what makes a tenant's runs slow). */
  lastRunMs = 0;
  /** Code versions compiled so far (each once, while it is kept). */
  compiles = 0;

  constructor(private readonly module: QuickJSWASMModule) {}

  /** Whether `code` compiles and defines `handler` (its top level run once, within the caps). */
  check(code: string): CompileAnswer {
    const made = this.compile(code);
    if ('error' in made) return { ok: false, ...made };
    const { context, host, factory } = made.compiled;
    const probe = context.getProp(host, 'handlerOf');
    const answer = this.within(made.compiled, () => context.callFunction(probe, host, factory));
    probe.dispose();
    if (!answer.ok) {
      this.forget(code);
      return { ok: false, ...describe(answer.thrown) };
    }
    return { ok: true };
  }

  /** One run of `code`'s handler over `input` (JSON), its clock at `nowMs`. */
  run(code: string, input: string, nowMs: number): EngineAnswer {
    const made = this.compiledOf(code);
    if ('error' in made) return { ok: false, error: made.error };
    const { context, host, factory } = made.compiled;
    const setNow = context.getProp(host, 'setNow');
    const run = context.getProp(host, 'run');
    // The clock and the input go in before the run's time starts: no cap can cut them off.
    made.compiled.runtime.setInterruptHandler(NEVER);
    const at = context.newNumber(nowMs);
    context.callFunction(setNow, host, at).unwrap().dispose();
    at.dispose();
    const text = context.newString(input);
    const limit = context.newNumber(TRANSFORMATION_LIMITS.resultBytes);
    const started = performance.now();
    const answer = this.within(made.compiled, () =>
      context.callFunction(run, host, factory, text, limit),
    );
    this.lastRunMs = performance.now() - started;
    text.dispose();
    limit.dispose();
    setNow.dispose();
    run.dispose();
    if (!answer.ok) {
      // A run cut off (time, memory, stack) may leave its runtime half-way: compile afresh.
      this.forget(code);
      return { ok: false, error: describe(answer.thrown).error };
    }
    return { ok: true, json: answer.value as string };
  }

  /** Drops every compiled version (the thread's end). */
  dispose(): void {
    for (const code of [...this.compiled.keys()]) this.forget(code);
  }

  /** `call` under a fresh time cap; its value dumped out of the sandbox, or what it threw. */
  private within(
    compiled: Compiled,
    call: () => ReturnType<QuickJSContext['callFunction']>,
  ): { ok: true; value: unknown } | { ok: false; thrown: unknown } {
    compiled.runtime.setInterruptHandler(afterRunTime(TRANSFORMATION_LIMITS.runMs));
    const result = call();
    if (result.error) {
      const thrown = compiled.context.dump(result.error);
      result.error.dispose();
      return { ok: false, thrown };
    }
    const value = compiled.context.dump(result.value);
    result.value.dispose();
    return { ok: true, value };
  }

  private compiledOf(code: string): { compiled: Compiled } | { error: string } {
    const kept = this.compiled.get(code);
    if (kept !== undefined) {
      // Most recently used last: the oldest is the one dropped.
      this.compiled.delete(code);
      this.compiled.set(code, kept);
      return { compiled: kept };
    }
    const made = this.compile(code);
    return 'error' in made ? { error: made.error } : made;
  }

  private compile(code: string): { compiled: Compiled } | { error: string; line: number | null } {
    this.forget(code);
    this.compiles += 1;
    const runtime = this.module.newRuntime();
    runtime.setMemoryLimit(TRANSFORMATION_LIMITS.memoryBytes);
    runtime.setMaxStackSize(TRANSFORMATION_LIMITS.stackBytes);
    runtime.setInterruptHandler(afterRunTime(TRANSFORMATION_LIMITS.runMs));
    const context = runtime.newContext();
    const host = context.evalCode(PRELUDE, 'prelude.js').unwrap();
    // On the code's first line, so that its lines keep their numbers in every message; strict, so
    // that writing to a frozen built-in throws rather than doing nothing.
    const wrapped = `(function () {'use strict';${code}\n;return typeof handler === 'function' ? handler : undefined;\n})`;
    const made = context.evalCode(wrapped, FILE_NAME);
    if (made.error) {
      const thrown = context.dump(made.error);
      made.error.dispose();
      host.dispose();
      context.dispose();
      runtime.dispose();
      return describe(thrown);
    }
    const compiled = { runtime, context, host, factory: made.value };
    if (this.compiled.size >= COMPILED_KEPT) {
      this.forget(this.compiled.keys().next().value as string);
    }
    this.compiled.set(code, compiled);
    return { compiled };
  }

  private forget(code: string): void {
    const compiled = this.compiled.get(code);
    if (compiled === undefined) return;
    this.compiled.delete(code);
    compiled.factory.dispose();
    compiled.host.dispose();
    compiled.context.dispose();
    compiled.runtime.dispose();
  }
}
