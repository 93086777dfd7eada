#!/usr/bin/env node
// The operator CLI, run from the compiled sources (see compiled.js).
import { importSource } from './compiled.js';

// The serving processes' V8 flags (`serve`, `worker`, and a cluster's processes, which run this too).
await importSource('v8-flags');
// Tracing, when configured, starts before the application's modules load (it patches them).
await (await importSource('tracing-start')).startTracingIfConfigured();
await importSource('cli/main');
