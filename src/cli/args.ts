import { parseArgs } from 'node:util';

/** A command line the CLI cannot act on: one line on stderr, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';

  /** `command` names the command whose --help the message points to ('' for the top level). */
  constructor(
    message: string,
    readonly command = '',
  ) {
    super(message);
  }
}

export interface OptionSpec {
  type: 'string' | 'boolean';
  /** Placeholder shown in help, e.g. `<id|slug>`. */
  value?: string;
  required?: boolean;
  description: string;
  /** Other names of the option (the API's word for it, say); each parses as the option itself. */
  aliases?: readonly string[];
}

export interface PositionalSpec {
  name: string;
  description: string;
}

/** Options every command understands; `json` only where the command has JSON output. */
export const COMMON_OPTIONS = {
  json: { type: 'boolean', description: 'print machine-readable JSON on stdout' },
  help: { type: 'boolean', description: 'show this help' },
} as const satisfies Record<string, OptionSpec>;

export interface ParsedArgs {
  help: boolean;
  json: boolean;
  positionals: string[];
  /** A string option's value; '' counts as absent. */
  string(name: string): string | undefined;
  /** A string option that must be present, else a UsageError naming it. */
  required(name: string): string;
  /** Whether a boolean option was given. */
  flag(name: string): boolean;
}

interface ParseSpec {
  command: string;
  options: Record<string, OptionSpec>;
  positionals: PositionalSpec[];
  json: boolean;
}

/**
 * Strict parsing with Node's own parser; its errors become one-line UsageErrors. Required options
 * and positionals are checked here too, but only when --help was not asked for.
 */
export function parseCommandArgs(spec: ParseSpec, argv: string[]): ParsedArgs {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  if (spec.json) options.json = { type: 'boolean' };
  for (const [name, option] of Object.entries(spec.options)) {
    options[name] = { type: option.type };
    for (const alias of option.aliases ?? []) options[alias] = { type: option.type };
  }

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(describeParseError(error, spec), spec.command);
  }
  const { positionals } = parsed;
  const values = foldAliases(spec, parsed.values);
  const string = (name: string): string | undefined => {
    const value = values[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const args: ParsedArgs = {
    help: values.help === true,
    json: values.json === true,
    positionals,
    string,
    flag: (name) => values[name] === true,
    required(name) {
      const value = string(name);
      if (value === undefined) throw new UsageError(`--${name} is required`, spec.command);
      return value;
    },
  };
  if (args.help) return args;

  // Every missing option at once, not the first of them.
  const missing = Object.entries(spec.options)
    .filter(([name, option]) => option.required && args.string(name) === undefined)
    .map(([name]) => `--${name}`);
  if (missing.length > 0) {
    const verb = missing.length === 1 ? 'is' : 'are';
    throw new UsageError(`${missing.join(', ')} ${verb} required`, spec.command);
  }
  if (positionals.length < spec.positionals.length) {
    const missing = spec.positionals[positionals.length];
    throw new UsageError(`missing <${missing.name}>`, spec.command);
  }
  if (positionals.length > spec.positionals.length) {
    throw new UsageError(
      `unexpected argument "${positionals[spec.positionals.length]}"`,
      spec.command,
    );
  }
  return args;
}

/** Each alias's value under its option's own name; two names of one option given is an error. */
function foldAliases(
  spec: ParseSpec,
  parsed: ReturnType<typeof parseArgs>['values'],
): ReturnType<typeof parseArgs>['values'] {
  const values = { ...parsed };
  for (const [name, option] of Object.entries(spec.options)) {
    for (const alias of option.aliases ?? []) {
      if (values[alias] === undefined) continue;
      if (values[name] !== undefined) {
        throw new UsageError(`--${name} and --${alias} are one option: give one`, spec.command);
      }
      values[name] = values[alias];
      delete values[alias];
    }
  }
  return values;
}

function describeParseError(error: unknown, spec: ParseSpec): string {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    return option === '--json' && !spec.json
      ? `--json is not available for ${spec.command}`
      : `unknown option ${option}`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    return spec.options[option.replace(/^-+/, '')]?.type === 'string'
      ? `${option} needs a value`
      : `${option} does not take a value`;
  }
  return message.split('\n')[0];
}
