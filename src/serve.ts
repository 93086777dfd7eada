import { type Config, describeDatabase } from './config.ts';
import { demoInstructions, seedDemoIfEmpty } from './demo.ts';
import { createHttpApp, createRuntime, type Runtime } from './runtime.ts';
import { startWorker } from './webhooks/start-worker.ts';

/**
 * Runs the API, and the webhook delivery worker unless `worker` is false, until SIGINT/SIGTERM;
 * then stops taking requests and claims, lets running attempts finish, and closes the database.
 */
export async function serve(
  config: Config,
  options: { seedDemo: boolean; worker: boolean },
): Promise<void> {
  const runtime = await createRuntime(config, { listen: true });
  const demo = options.seedDemo ? await seedDemoIfEmpty(runtime) : null;
  const app = await createHttpApp(runtime);
  const worker = options.worker ? startWorker(runtime) : null;
  // Before the banner: whoever waits for it may signal at once.
  stopOnSignals(runtime, () => Promise.all([app.close(), worker?.stop()]));
  await app.listen({ port: config.port, host: config.host });
  process.stdout.write(
    `\nTour-operator API listening on ${config.publicBaseUrl} (${describeDatabase(config)})\n`,
  );
  if (demo) {
    process.stdout.write(`\n${demoInstructions(demo, config.publicBaseUrl)}\n`);
  } else if (options.seedDemo) {
    process.stdout.write(
      'Mint a token with: npx tourops token create --tenant demo --scopes all\n',
    );
  }
  process.stdout.write(`OpenAPI document: ${config.publicBaseUrl}/v1/openapi.json\n\n`);
}

/**
 * On the first SIGINT or SIGTERM: `drain` (stop taking work, finish what runs), close the
 * database, exit 0. Shared by `serve` and `tourops worker`.
 */
export function stopOnSignals(runtime: Runtime, drain: () => Promise<unknown>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    runtime.logger.info({ signal }, 'shutting down');
    await drain();
    await runtime.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}
