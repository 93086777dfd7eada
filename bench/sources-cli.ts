/**
 * The CLI as it runs without its build: the sources through tsx (`node --import tsx
 * bench/sources-cli.ts <args>`), the baseline of the start-up rows (see startup.ts). The same
 * entry points, in the same order, as bin/tourops.js.
 */
await import('../src/v8-flags.ts');
await (await import('../src/tracing-start.ts')).startTracingIfConfigured();
await import('../src/cli/main.ts');
