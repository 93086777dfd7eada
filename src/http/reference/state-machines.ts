import { LIFECYCLES, type Lifecycle } from '../../domain/states.ts';

/**
 * The lifecycles as Markdown tables, rendered from the tables the services enforce: the same
 * text is in both references and in docs/api-behaviour.md (a test compares), so none can drift.
 * The public reference leaves out the admin operations that make the moves.
 */
export function stateMachinesMarkdown(options: { operations: boolean }): string {
  return [
    '## State machines',
    'A move that is not listed is refused with 409 `conflict`, `code` `invalid_transition`, and ' +
      'the problem carries `from` (the current state) and `allowed` (the states it may move to; ' +
      'empty when it is final).',
    ...LIFECYCLES.map((lifecycle) => lifecycleTable(lifecycle, options.operations)),
  ].join('\n\n');
}

function lifecycleTable(lifecycle: Lifecycle, operations: boolean): string {
  const rows = Object.entries(lifecycle.transitions).flatMap(([from, targets]) =>
    targets.map((to) => {
      const events = lifecycle.events[`${from}>${to}`] ?? [];
      const emitted = events.length === 0 ? 'none' : events.map((type) => `\`${type}\``).join(', ');
      return `| \`${from}\` | \`${to}\` | ${lifecycle.mover} | ${emitted} |`;
    }),
  );
  const states = Object.keys(lifecycle.transitions);
  const final = states.filter((state) => lifecycle.transitions[state].length === 0);
  return [
    `### ${lifecycle.name}`,
    `Starts as \`${states[0]}\`; final: ${final.map((state) => `\`${state}\``).join(', ')}. ` +
      `The ${lifecycle.mover} moves it${operations ? ` with \`${lifecycle.operation}\`` : ''}.`,
    ['| From | To | Who may | Events emitted |', '| --- | --- | --- | --- |', ...rows].join('\n'),
  ].join('\n\n');
}
