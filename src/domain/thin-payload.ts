import { type TObject, type TSchema, Type } from '@sinclair/typebox';
import { EVENT_DATA_SCHEMAS } from './event-schemas.ts';
import type { EventType } from './states.ts';

/**
 * A subscription's payload form: `full` sends the event's whole `data`; `thin` only its ids and
 * the names of the members that changed, for a receiver that fetches what it needs
 * (`GET /api/v1/events/{id}`) and should hold no more of a traveller's data than that.
 */
export const PAYLOAD_FORMS = ['full', 'thin'] as const;
export type PayloadForm = (typeof PAYLOAD_FORMS)[number];

/** A member of the full `data` a thin body keeps: an id, named `…Id`. */
const isIdMember = (name: string): boolean => name.endsWith('Id');

type ThinData = Record<string, unknown> & { changed: string[] };

/**
 * The thin form of an event's full `data`: each `…Id` member, in the full data's order, then
 * `changed`, the names of `data.changes` (`[]` for a creation or an event that carries none).
 */
export function thinData(data: Record<string, unknown>): ThinData {
  const thin: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(data)) if (isIdMember(name)) thin[name] = value;
  const changes = data.changes;
  const changed =
    changes !== null && typeof changes === 'object' ? Object.keys(changes as object) : [];
  return { ...thin, changed };
}

/** `thinData` of stored data text, as JSON text. */
export function thinDataText(data: string): string {
  return JSON.stringify(thinData(JSON.parse(data) as Record<string, unknown>));
}

/** The JSON Schema of a thin `data` of the type, derived from its full one. */
function thinSchemaOf(full: TObject): TObject {
  const ids = Object.fromEntries(
    Object.entries(full.properties as Record<string, TSchema>).filter(([name]) => isIdMember(name)),
  );
  const changes = (full.properties as Record<string, TSchema>).changes as TObject | undefined;
  const names = changes === undefined ? [] : Object.keys(changes.properties);
  const changed =
    names.length === 0
      ? Type.Array(Type.String(), {
          maxItems: 0,
          description: '`[]`: the event changes no member (a creation, or no resource).',
        })
      : Type.Array(Type.Union(names.map((name) => Type.Literal(name))), {
          uniqueItems: true,
          description:
            'The names of the members this change moved (the keys of the full `data.changes`).',
        });
  return Type.Object({ ...ids, changed }, { additionalProperties: false });
}

/** `data` of each event type in the thin form, as the catalog and the reference publish it. */
export const THIN_DATA_SCHEMAS = Object.fromEntries(
  Object.entries(EVENT_DATA_SCHEMAS).map(([type, schema]) => [
    type,
    thinSchemaOf(schema as TObject),
  ]),
) as Record<EventType, TObject>;

/**
 * The Markdown table docs/personal-data.md shows between its `thin-payloads` markers: each
 * subscribable type and the members of its thin `data` (test/thin-payloads.test.ts holds the page
 * to it).
 */
export function thinPayloadTable(types: readonly EventType[]): string {
  return [
    '| Event type | Thin `data` |',
    '|---|---|',
    ...types.map(
      (type) =>
        `| \`${type}\` | ${Object.keys(THIN_DATA_SCHEMAS[type].properties)
          .map((name) => `\`${name}\``)
          .join(', ')} |`,
    ),
  ].join('\n');
}
