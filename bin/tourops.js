#!/usr/bin/env node
// The operator CLI runs the TypeScript sources directly: tsx (a runtime dependency) compiles them
// on the fly, so `npm ci` is the only set-up step.
import { register } from 'tsx/esm/api';

register();
// The serving processes' V8 flags (`serve`, `worker`, and a cluster's processes, which run this too).
await import('../src/v8-flags.ts');
// Tracing, when configured, starts before the application's modules load (it patches them).
await (await import('../src/tracing-start.ts')).startTracingIfConfigured();
await import('../src/cli/main.ts');
