import './v8-flags.ts';
import { startTracingIfConfigured } from './tracing-start.ts';

// Tracing, when configured, starts before the application's modules load (it patches them).
await startTracingIfConfigured();
const { loadConfig } = await import('./config.ts');
const { serve } = await import('./serve.ts');
const { describeStartupError } = await import('./startup-error.ts');

/** `npm start`: migrate, seed the demo tenant on an empty database, serve with the worker. */
try {
  await serve(loadConfig(), { seedDemo: true, worker: true });
} catch (error) {
  const line = describeStartupError(error);
  if (line === null) throw error;
  console.error(`tourops: ${line}`);
  process.exit(1);
}
