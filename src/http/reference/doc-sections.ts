import { durationText } from '../../domain/durations.ts';
import { RETRY_SCHEDULE_LIMITS } from '../../domain/retry-schedule.ts';
import { TRANSFORMATION_LIMITS } from '../../domain/transformation.ts';
import { SANDBOX_MEMORY_BYTES } from '../../transformations/engine.ts';

/**
 * The sections of the docs that the code writes: each stands between
 * `<!-- generated: <name> -->` and `<!-- end generated -->` in a page of docs/, rendered here from
 * the declarations that enforce it, so the page cannot state a limit the code does not hold.
 * `npm run docs:sections` writes them; `npm run lint` fails while one differs.
 */

const bytes = (n: number) =>
  n % (1024 * 1024) === 0
    ? `${n / 1024 / 1024} MB`
    : n % 1024 === 0
      ? `${n / 1024} KB`
      : `${n} bytes`;

const table = (rows: ReadonlyArray<readonly [string, string]>) =>
  ['| Limit | Value |', '|---|---|', ...rows.map(([what, value]) => `| ${what} | ${value} |`)].join(
    '\n',
  );

const SECTIONS: Readonly<Record<string, () => string>> = {
  'transformation-limits': () => {
    const t = TRANSFORMATION_LIMITS;
    const r = RETRY_SCHEDULE_LIMITS;
    return table([
      ['Code (UTF-8)', bytes(t.codeBytes)],
      ['Time of one run', `${t.runMs} ms`],
      ['Memory of one run', bytes(t.memoryBytes)],
      ["The sandbox's whole memory (every run's within it)", bytes(SANDBOX_MEMORY_BYTES)],
      ['Call stack', bytes(t.stackBytes)],
      ['What a run returns, as JSON', bytes(t.resultBytes)],
      ['Extra headers', String(t.headers)],
      ["A failed run's message", `${t.messageChars} characters`],
      ['Waits in a retry schedule', `1 to ${r.waits}`],
      ['One wait', `${durationText(r.minMs)} to ${durationText(r.maxMs)}`],
    ]);
  },
};

const SECTION = /(<!-- generated: ([a-z-]+) -->\n)([\s\S]*?)(<!-- end generated -->)/g;

/** `markdown` with each generated section as the code writes it (an unknown name throws). */
export function withGeneratedSections(markdown: string): string {
  return markdown.replace(SECTION, (_all, open: string, name: string, _old, close: string) => {
    const render = SECTIONS[name];
    if (render === undefined) throw new Error(`no generated section is named ${name}`);
    return `${open}${render()}\n${close}`;
  });
}
