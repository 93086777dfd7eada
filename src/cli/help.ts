import { COMMON_OPTIONS, type OptionSpec } from './args.ts';
import type { Command } from './command.ts';

const WIDTH = 100;

function optionLabel(name: string, option: OptionSpec, withAliases = true): string {
  const names = withAliases ? [name, ...(option.aliases ?? [])] : [name];
  const flag = name === 'help' ? '-h, --help' : names.map((n) => `--${n}`).join(', ');
  return option.value ? `${flag} ${option.value}` : flag;
}

function usageLine(command: Command): string {
  const parts = [`tourops ${command.name}`];
  for (const positional of command.positionals) parts.push(`<${positional.name}>`);
  for (const [name, option] of Object.entries(command.options)) {
    const label = optionLabel(name, option, false);
    parts.push(option.required ? label : `[${label}]`);
  }
  if (command.json) parts.push('[--json]');
  return parts.join(' ');
}

/** Two columns, the second wrapped under itself. */
function table(rows: [string, string][]): string {
  const left = Math.max(...rows.map(([label]) => label.length)) + 2;
  return rows
    .map(([label, text]) => {
      const lines = wrap(text, WIDTH - left - 2);
      return lines.map((line, i) => `  ${(i === 0 ? label : '').padEnd(left)}${line}`).join('\n');
    })
    .join('\n');
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  lines.push(line);
  return lines;
}

export function commandHelp(command: Command): string {
  const rows: [string, string][] = command.positionals.map((positional) => [
    `<${positional.name}>`,
    positional.description,
  ]);
  for (const [name, option] of Object.entries(command.options)) {
    rows.push([
      optionLabel(name, option),
      option.required ? `${option.description} (required)` : option.description,
    ]);
  }
  if (command.json)
    rows.push([optionLabel('json', COMMON_OPTIONS.json), COMMON_OPTIONS.json.description]);
  rows.push([optionLabel('help', COMMON_OPTIONS.help), COMMON_OPTIONS.help.description]);
  const summary = `${command.summary.charAt(0).toUpperCase()}${command.summary.slice(1)}.`;
  const paragraphs = [summary, ...command.description];
  return (
    `Usage: ${usageLine(command)}\n\n` +
    paragraphs.map((paragraph) => wrap(paragraph, WIDTH).join('\n')).join('\n\n') +
    `\n\nOptions:\n${table(rows)}\n` +
    examplesSection(command.examples ?? [])
  );
}

export function topHelp(commands: Command[]): string {
  const rows: [string, string][] = commands.map((command) => [
    [
      command.name,
      ...command.positionals.map((positional) => `<${positional.name}>`),
      ...Object.entries(command.options)
        .filter(([, option]) => option.type === 'boolean')
        .map(([name]) => `[--${name}]`),
    ].join(' '),
    command.summary,
  ]);
  return (
    'Usage: tourops <command> [options]\n\n' +
    wrap(
      'Operator CLI of the tour-operator API. It works on the database directly, through the same ' +
        'services as the HTTP API, configured by the same environment variables as `npm start` ' +
        '(DATABASE_URL, DATA_DIR, SECRET_KEY, PUBLIC_BASE_URL, LOG_LEVEL, ...).',
      WIDTH,
    ).join('\n') +
    `\n\nCommands:\n${table(rows)}\n` +
    examplesSection(commands.flatMap((command) => command.examples ?? [])) +
    '\n' +
    'Every command takes -h/--help; all but serve take --json (machine-readable output on stdout,\n' +
    'errors too: {"error": {"message", "type", ...}}). `tourops --version` prints the version.\n' +
    'Run `tourops <command> --help` for its options.\n\n' +
    'Exit codes: 0 done, 1 failed (bad environment variable, not found, conflict, ...), 2 bad command line.\n'
  );
}

/** `tourops token --help`: the commands of one group. */
export function groupHelp(group: string, commands: Command[]): string {
  const entries = commands.map((command) => `  ${usageLine(command)}\n      ${command.summary}`);
  return (
    `Usage: tourops ${group} <command> [options]\n\nCommands:\n${entries.join('\n')}\n\n` +
    `Run \`tourops ${group} <command> --help\` for details.\n`
  );
}

function examplesSection(examples: string[]): string {
  return examples.length === 0
    ? ''
    : `\nExamples:\n${examples.map((line) => `  ${line}\n`).join('')}`;
}
