import packageJson from '../../package.json' with { type: 'json' };
import { ConfigError, misspeltMessage, misspeltVariables } from '../config.ts';
import { ApiProblem, type FieldErrors } from '../lib/problems.ts';
import { describeStartupError } from '../startup-error.ts';
import { parseCommandArgs, UsageError } from './args.ts';
import type { Command } from './command.ts';
import { COMMANDS } from './commands.ts';
import { type CliIo, createCommandContext } from './context.ts';
import { commandHelp, groupHelp, topHelp } from './help.ts';

/** An exit code, or `serving` when a server now owns the process. */
export type CliOutcome = number | 'serving';

const HELP_FLAGS = new Set(['-h', '--help']);
const VERSION: string = packageJson.version;

/**
 * Runs one command line. Failures become a single `tourops: …` line on stderr: exit code 2 for a
 * command line that cannot be acted on, 1 for everything else (configuration, domain problems,
 * the database).
 */
export async function runCli(
  argv: string[],
  io: CliIo,
  commands: Command[] = COMMANDS,
): Promise<CliOutcome> {
  try {
    return await dispatch(argv, io, commands);
  } catch (error) {
    if (wantsJson(argv, commands)) {
      // Scripts read one JSON document on stdout whatever happened; the exit code says which.
      io.stdout.write(`${JSON.stringify({ error: describeErrorAsJson(error) })}\n`);
    } else {
      io.stderr.write(`tourops: ${describeError(error)}\n`);
    }
    const expected =
      error instanceof UsageError || error instanceof ConfigError || error instanceof ApiProblem;
    // A bug's stack on request only: operators get the one line.
    if (!expected && isDebug(io.env) && error instanceof Error && error.stack) {
      io.stderr.write(`${error.stack}\n`);
    }
    return error instanceof UsageError ? 2 : 1;
  }
}

async function dispatch(argv: string[], io: CliIo, commands: Command[]): Promise<CliOutcome> {
  // `tourops --json <command>` reads naturally too; other options belong after the command.
  const leadingJson = argv[0] === '--json';
  const words = leadingJson ? argv.slice(1) : argv;
  const [first, ...rest] = words;
  if (first === undefined) throw new UsageError('missing command');
  if (first === '--version' || first === '-V') {
    io.stdout.write(
      leadingJson || rest.includes('--json')
        ? `${JSON.stringify({ version: VERSION })}\n`
        : `tourops ${VERSION}\n`,
    );
    return 0;
  }
  // `tourops help token create` is `tourops token create --help`.
  if (first === 'help' && rest.length > 0) return dispatch([...rest, '--help'], io, commands);
  if (HELP_FLAGS.has(first) || first === 'help') {
    io.stdout.write(topHelp(commands));
    return 0;
  }
  if (first.startsWith('-')) {
    throw new UsageError(`unknown option ${first} (options go after the command)`);
  }

  const found = findCommand(words, commands);
  if (!found) {
    const group = commands.filter((command) => command.name.startsWith(`${first} `));
    if (group.length === 0) throw new UsageError(`unknown command "${first}"`);
    const sub = rest[0];
    if (sub !== undefined && HELP_FLAGS.has(sub)) {
      io.stdout.write(groupHelp(first, group));
      return 0;
    }
    const choices = group.map((command) => command.name.slice(first.length + 1)).join(' or ');
    throw new UsageError(
      sub === undefined || sub.startsWith('-')
        ? `${first} needs a command: ${choices}`
        : `unknown command "${first} ${sub}"; try ${choices}`,
      first,
    );
  }

  const { command, argv: commandArgv } = found;
  const args = parseCommandArgs(
    {
      command: command.name,
      options: command.options,
      positionals: command.positionals,
      json: command.json,
    },
    leadingJson ? ['--json', ...commandArgv] : commandArgv,
  );
  if (args.help) {
    io.stdout.write(commandHelp(command));
    return 0;
  }
  if (!command.logsVariableNames) {
    for (const misspelt of misspeltVariables(io.env)) {
      io.stderr.write(`tourops: warning: ${misspeltMessage(misspelt)}\n`);
    }
  }
  const outcome = await command.run(createCommandContext(io, args.json), args);
  return outcome === 'serving' ? 'serving' : 0;
}

/** `--json` was asked for, of a command that offers it (`serve --json` is a usage error). */
function wantsJson(argv: string[], commands: Command[]): boolean {
  if (!argv.includes('--json')) return false;
  const words = argv.filter((word) => word !== '--json');
  return findCommand(words, commands)?.command.json ?? true;
}

/** The longest command whose words start the command line. */
function findCommand(
  words: string[],
  commands: Command[],
): { command: Command; argv: string[] } | undefined {
  let best: { command: Command; argv: string[] } | undefined;
  for (const command of commands) {
    const name = command.name.split(' ');
    const matches = name.every((word, i) => words[i] === word);
    if (matches && (!best || name.length > best.command.name.split(' ').length)) {
      best = { command, argv: words.slice(name.length) };
    }
  }
  return best;
}

/** The error of a `--json` run: the one-line message, and a problem's type, status and fields. */
function describeErrorAsJson(error: unknown): Record<string, unknown> {
  const message = describeError(error);
  if (error instanceof ApiProblem) {
    return {
      message,
      type: error.slug,
      status: error.status,
      ...(isFieldErrors(error.extra.errors) ? { errors: error.extra.errors } : {}),
    };
  }
  if (error instanceof UsageError) return { message, type: 'usage' };
  if (error instanceof ConfigError) return { message, type: 'configuration' };
  return { message, type: 'failure' };
}

export function describeError(error: unknown): string {
  if (error instanceof UsageError) {
    return `${error.message} (see: tourops${error.command ? ` ${error.command}` : ''} --help)`;
  }
  if (error instanceof ApiProblem) return oneLine(describeProblem(error));
  if (error instanceof AggregateError && !error.message) {
    // pg reports a refused connection as an AggregateError with one error per address tried.
    return oneLine(error.errors.map((inner) => describeError(inner)).join('; '));
  }
  const startup = describeStartupError(error);
  if (startup !== null) return startup;
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return oneLine(error.message || (typeof code === 'string' ? code : error.name));
  }
  return oneLine(String(error));
}

/** The problem's detail, with its field errors unless the detail already is the only one. */
function describeProblem(problem: ApiProblem): string {
  const errors = problem.extra.errors;
  if (!isFieldErrors(errors)) return problem.detail;
  const messages = Object.entries(errors).flatMap(([field, list]) =>
    list.map((message) => `${field}: ${message}`),
  );
  if (messages.length === 0 || (messages.length === 1 && messages[0] === problem.detail)) {
    return problem.detail;
  }
  return `${problem.detail} (${messages.join('; ')})`;
}

function isFieldErrors(value: unknown): value is FieldErrors {
  return (
    typeof value === 'object' &&
    value !== null &&
    Object.values(value).every(
      (list) => Array.isArray(list) && list.every((item) => typeof item === 'string'),
    )
  );
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

function isDebug(env: CliIo['env']): boolean {
  return env.LOG_LEVEL === 'debug' || env.LOG_LEVEL === 'trace';
}
