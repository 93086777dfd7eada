import './v8-flags.ts';
import { loadConfig } from './config.ts';
import { serve } from './serve.ts';
import { describeStartupError } from './startup-error.ts';

/** `npm start`: migrate, seed the demo tenant on an empty database, serve with the worker. */
try {
  await serve(loadConfig(), { seedDemo: true, worker: true });
} catch (error) {
  const line = describeStartupError(error);
  if (line === null) throw error;
  console.error(`tourops: ${line}`);
  process.exit(1);
}
