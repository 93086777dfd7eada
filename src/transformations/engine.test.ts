import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { TRANSFORMATION_LIMITS } from '../domain/transformation.ts';
import { SandboxEngine, sandboxModule } from './engine.ts';

// The sandbox itself, in this process (the service runs it on a thread of its own: runner.ts):
// hostile code of every kind ends in a clear message and leaves the engine serving, and nothing
// of the host is in reach (the walk below lists every name the code can get at).

const INPUT = JSON.stringify({
  type: 'booking.created',
  payload: { id: 'evt_1', data: { bookingId: 'bkg_1' } },
  url: 'https://receiver.test/hook',
  headers: {},
});
const NOW = Date.parse('2026-12-03T10:00:00Z');

/** `body` as a handler's body, over `webhook`. */
const handler = (body: string) => `function handler(webhook) {\n${body}\n}`;

describe('the transformation sandbox', () => {
  let engine: SandboxEngine;
  before(async () => {
    engine = new SandboxEngine(await sandboxModule());
  });

  const run = (code: string) => engine.run(code, INPUT, NOW);
  const failure = (code: string) => {
    const answer = run(code);
    assert.equal(answer.ok, false, `expected a failure, got ${JSON.stringify(answer)}`);
    return (answer as { error: string }).error;
  };

  it('runs a handler and gives back what it returned, as JSON', () => {
    const answer = run(handler('webhook.payload = { text: webhook.type }; return webhook;'));
    assert.deepEqual(answer.ok && JSON.parse(answer.json).payload, { text: 'booking.created' });
  });

  it('ends each kind of hostile code with a clear, bounded message, and keeps serving', () => {
    const cases: Array<[string, string, RegExp]> = [
      ['an endless loop', 'for (;;) {}', /ran longer than 100 ms/],
      [
        'an endless loop at the top level',
        'while (true) {}\nfunction handler(w) { return w }',
        /ran longer than 100 ms/,
      ],
      [
        'a memory bomb',
        "const a = []; for (;;) a.push('x'.repeat(1e6) + a.length);",
        /ran out of memory/,
      ],
      [
        'a memory bomb of objects',
        'const a = []; for (;;) a.push({ a: [1, 2, 3], b: a.length });',
        /ran out of memory|ran longer/,
      ],
      [
        'typed arrays (memory QuickJS does not count)',
        'const a = []; for (;;) a.push(new Uint8Array(1e6));',
        /ran out of memory/,
      ],
      [
        'a 100 MB payload',
        "webhook.payload = 'x'.repeat(100 * 1024 * 1024); return webhook;",
        /ran out of memory/,
      ],
      [
        'a payload past the result bound',
        "webhook.payload = 'x'.repeat(2 * 1024 * 1024); return webhook;",
        /more than 1048576 characters/,
      ],
      ['deep recursion', 'const f = (n) => f(n + 1) + 1; return f(0);', /stack overflow/],
      [
        'a returned cycle',
        'const p = {}; p.self = p; webhook.payload = p; return webhook;',
        /circular/,
      ],
      ['a Promise', 'return Promise.resolve(webhook);', /returned a Promise/],
      ['nothing', 'return;', /returned nothing/],
      ['a thrown string', "throw 'nope';", /threw "nope"/],
      ['Math.random', 'Math.random(); return webhook;', /Math\.random is not available/],
      ['a write to a built-in', 'Array.prototype.evil = 1; return webhook;', /TypeError/],
      ['require', "require('fs'); return webhook;", /ReferenceError: 'require' is not defined/],
      ['process', 'process.exit(1); return webhook;', /ReferenceError: 'process' is not defined/],
      [
        'the host reached for through a prototype',
        "webhook.constructor.constructor('return process')(); return webhook;",
        /ReferenceError: 'process' is not defined/,
      ],
      [
        'fetch',
        "fetch('https://example.com'); return webhook;",
        /ReferenceError: 'fetch' is not defined/,
      ],
      [
        'a timer',
        'setTimeout(() => 0, 1); return webhook;',
        /ReferenceError: 'setTimeout' is not defined/,
      ],
    ];
    for (const [what, body, message] of cases) {
      const code = body.includes('function handler') ? body : handler(body);
      const error = failure(code);
      assert.match(error, message, what);
      assert.ok(error.length <= TRANSFORMATION_LIMITS.messageChars, `${what}: bounded`);
      assert.doesNotMatch(
        error,
        /\/work|node_modules|wasm-function|\.ts:/,
        `${what}: nothing of ours`,
      );
      // The engine still serves the next run, the same code's or another's.
      assert.equal(run(handler('return webhook;')).ok, true, `${what}: serving after`);
    }
  });

  it('refuses code that does not compile or defines no handler, naming the line', () => {
    assert.deepEqual(engine.check(handler('return webhook +;')), {
      ok: false,
      error: "SyntaxError: unexpected token in expression: ';' (line 2)",
      line: 2,
    });
    const none = engine.check('const handle = (w) => w;');
    assert.equal(none.ok, false);
    assert.match((none as { error: string }).error, /defines no function handler/);
    assert.deepEqual(engine.check(handler('return webhook;')), { ok: true });
  });

  it('dynamic import reaches nothing', () => {
    const answer = run(
      handler(
        "let seen = 'none'; import('fs').then(() => { seen = 'loaded'; }, () => { seen = 'refused'; }); webhook.payload = seen; return webhook;",
      ),
    );
    assert.equal(answer.ok && JSON.parse(answer.json).payload, 'none', 'no module loads');
  });

  it('compiles a code version once, however many runs it has', () => {
    const code = handler('webhook.payload = 1; return webhook;');
    const before = engine.compiles;
    for (let i = 0; i < 100; i++) assert.equal(run(code).ok, true);
    assert.equal(engine.compiles - before, 1);
  });

  it('a run starts from nothing another run left', () => {
    const code =
      'let runs = 0;\nfunction handler(webhook) { runs += 1; webhook.payload = runs; return webhook; }';
    for (let i = 0; i < 3; i++) {
      const answer = run(code);
      assert.equal(answer.ok && JSON.parse(answer.json).payload, 1);
    }
  });

  it('reads a fixed clock: the delivery time it is given, however it asks', () => {
    const answer = run(
      handler(
        'const D = Object.getPrototypeOf(new Date()).constructor; webhook.payload = [Date.now(), new Date().getTime(), Reflect.construct(Date, []).getTime(), new D().getTime(), Date(), new Date(0).getTime()]; return webhook;',
      ),
    );
    assert.ok(answer.ok);
    const [now, made, constructed, viaPrototype, text, epoch] = JSON.parse(answer.json).payload;
    assert.deepEqual([now, made, constructed, viaPrototype], [NOW, NOW, NOW, NOW]);
    assert.match(text, /^Thu Dec 03 2026 10:00:00 GMT\+0000/);
    assert.equal(epoch, 0, 'dates it is given are its own');
  });

  it('holds nothing of the host: every name reachable from the global object is the language’s own', () => {
    // Every property key reachable from globalThis (through values, accessors and prototypes).
    const walk = handler(`
      const seen = new Set(); const names = new Set(); const stack = [globalThis];
      while (stack.length > 0) {
        const value = stack.pop();
        if ((typeof value !== 'object' && typeof value !== 'function') || value === null || seen.has(value)) continue;
        seen.add(value);
        stack.push(Object.getPrototypeOf(value));
        for (const key of Reflect.ownKeys(value)) {
          names.add(typeof key === 'symbol' ? String(key) : key);
          const d = Object.getOwnPropertyDescriptor(value, key);
          if ('value' in d) stack.push(d.value); else stack.push(d.get, d.set);
        }
      }
      webhook.payload = { globals: Object.getOwnPropertyNames(globalThis).sort(), names: [...names], objects: seen.size };
      return webhook;`);
    const answer = run(walk);
    assert.ok(answer.ok, JSON.stringify(answer));
    const { globals, names } = JSON.parse(answer.json).payload as {
      globals: string[];
      names: string[];
    };
    // The language's global names (WeakRef and FinalizationRegistry dropped: see PRELUDE).
    const ecmascript = `AggregateError Array ArrayBuffer BigInt BigInt64Array BigUint64Array
      Boolean DataView Date Error EvalError Float16Array Float32Array Float64Array Function
      Infinity Int16Array Int32Array Int8Array InternalError Iterator JSON Map Math NaN Number
      Object Promise Proxy RangeError ReferenceError Reflect RegExp Set SharedArrayBuffer String
      Symbol SyntaxError TypeError URIError Uint16Array Uint32Array Uint8Array Uint8ClampedArray
      WeakMap WeakSet decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval
      globalThis isFinite isNaN parseFloat parseInt undefined unescape`.split(/\s+/);
    assert.deepEqual(globals, [...ecmascript].sort(), 'the global object holds the language alone');
    const host = `require process fetch module exports Buffer console setTimeout setInterval
      setImmediate queueMicrotask WebAssembly XMLHttpRequest WebSocket std os scriptArgs print
      Worker SharedWorker importScripts Deno Bun WeakRef FinalizationRegistry Atomics __dirname
      __filename`.split(/\s+/);
    for (const name of host) assert.ok(!names.includes(name), `${name} is out of reach`);
  });
});
