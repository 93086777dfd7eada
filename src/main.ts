import { ConfigError, loadConfig } from './config.ts';
import { serve } from './serve.ts';

/** `npm start`: migrate, seed the demo tenant on an empty database, serve. */
try {
  await serve(loadConfig(), { seedDemo: true });
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`tourops: ${error.message}`);
    process.exit(1);
  }
  throw error;
}
