import { existsSync } from 'node:fs';
import type pino from 'pino';
import { type Config, ConfigError, embeddedDatabaseFile, loadConfig } from '../config.ts';
import type { Runtime } from '../runtime.ts';

interface Output {
  write(chunk: string): unknown;
}

/** Where the CLI reads its environment and writes; the process's own in `main.ts`. */
export interface CliIo {
  stdout: Output;
  stderr: Output;
  env: Record<string, string | undefined>;
}

/** What a command handler gets: output helpers and lazy access to config and services. */
export interface CommandContext {
  io: CliIo;
  json: boolean;
  /** Parsed once, on first use, so `--help` and usage errors never need a valid environment. */
  config(): Config;
  /**
   * Opens the runtime (migrating first, like `npm start`), runs `work`, always closes it. Without
   * a SECRET_KEY unless `needsKey` (the command seals or opens secrets); one that is there is
   * still checked against the database.
   */
  /**
   * `creates`: the command may make the embedded database (a first tenant); any other works on
   * the server's, and a DATA_DIR holding none is refused before anything is written there.
   */
  withRuntime<T>(
    work: (runtime: Runtime) => Promise<T>,
    options?: { needsKey?: boolean; creates?: boolean },
  ): Promise<T>;
  /** The human text, or with --json the value as JSON. Both on stdout. */
  print(human: string, json: unknown): void;
}

export function createCommandContext(io: CliIo, json: boolean): CommandContext {
  let config: Config | undefined;
  const context: CommandContext = {
    io,
    json,
    config: () => {
      config ??= loadConfig(io.env);
      return config;
    },
    async withRuntime(work, options = {}) {
      const runtimeConfig = context.config();
      const file = embeddedDatabaseFile(runtimeConfig.dataDir);
      if (!runtimeConfig.databaseUrl && !options.creates && !existsSync(file)) {
        throw new ConfigError(
          `DATA_DIR: there is no database at ${file}; set DATA_DIR to the server's (or DATABASE_URL to its PostgreSQL)`,
        );
      }
      // Loaded on first use: --help and usage errors then answer without loading the database
      // drivers, the services and Fastify (most of a second).
      const [{ createRuntime }, { default: pino }] = await Promise.all([
        import('../runtime.ts'),
        import('pino'),
      ]);
      const runtime = await createRuntime(runtimeConfig, {
        logger: cliLogger(pino, runtimeConfig, io),
        secretKey: options.needsKey ? 'required' : 'if-present',
      });
      try {
        return await work(runtime);
      } finally {
        await runtime.close();
      }
    },
    print(human, value) {
      io.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : human);
    },
  };
  return context;
}

/**
 * One-shot commands keep stdout for their result (it may be JSON): logs go to stderr, and the
 * default `info` level is lowered to `warn` so a routine "migrations applied" does not clutter
 * an operator's terminal. LOG_LEVEL=debug or trace still shows everything.
 */
function cliLogger(create: typeof pino, config: Config, io: CliIo): pino.Logger {
  const level = config.logLevel === 'info' ? 'warn' : config.logLevel;
  // io.stderr: the process's own (written synchronously on Linux), or what a caller collects.
  return create({ level }, { write: (line: string) => io.stderr.write(line) });
}
