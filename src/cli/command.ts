import { describeDatabase } from '../config.ts';
import { ApiProblem } from '../lib/problems.ts';
import type { Runtime } from '../runtime.ts';
import type { OptionSpec, ParsedArgs, PositionalSpec } from './args.ts';
import type { CommandContext } from './context.ts';

/** `serving`: the command keeps the process alive (the server) and exits on a signal. */
type CommandOutcome = 'done' | 'serving';

export interface Command {
  /** The words typed after `tourops`, e.g. `token create`. */
  name: string;
  summary: string;
  /** Paragraphs of help text after the usage line. */
  description: string[];
  /** Command lines shown as they are (never wrapped), each one runnable as printed. */
  examples?: string[];
  positionals: PositionalSpec[];
  options: Record<string, OptionSpec>;
  /** Whether `--json` is accepted. */
  json: boolean;
  /** Its start-up log names misspelt variables itself (else they are said on stderr first). */
  logsVariableNames?: true;
  run(ctx: CommandContext, args: ParsedArgs): Promise<CommandOutcome>;
}

/**
 * The services say "Tenant was not found."; on a command line, name what was typed and where it
 * was looked for (a DATA_DIR or DATABASE_URL other than the server's is the usual reason).
 */
export async function namingNotFound<T>(
  runtime: Runtime,
  work: Promise<T>,
  what: string,
): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof ApiProblem && error.slug === 'not-found') {
      throw new ApiProblem(
        'not-found',
        `${what} was not found in ${describeDatabase(runtime.config)}.`,
      );
    }
    throw error;
  }
}
