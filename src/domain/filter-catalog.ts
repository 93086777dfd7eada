import leven from 'leven';
import { EVENT_DATA_SCHEMAS } from './event-schemas.ts';
import { EVENT_TYPES, isOneOf } from './states.ts';

/**
 * A payload filter held against the event catalog: each path must be a member some event of the
 * subscription's types has, and each operand must be one that member's values can match (see
 * checkFilter, which asks this for every condition of a well-formed filter).
 */

/** What a path of an event body can hold: JSON types, and the only values when they are listed. */
interface Member {
  types: Set<string>;
  /** Null: any value of its types. */
  values: Set<unknown> | null;
}

type SchemaNode = {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  properties?: Record<string, SchemaNode>;
};

const ANY = 'any';

/** The JSON type a filter operand has, `integer` and `number` being one. */
function jsonType(value: unknown): string {
  if (value === null) return 'null';
  return typeof value === 'number' ? 'number' : typeof value;
}

function merge(into: Member | undefined, member: Member): Member {
  if (into === undefined) return { types: new Set(member.types), values: member.values };
  for (const type of member.types) into.types.add(type);
  into.values =
    into.values === null || member.values === null
      ? null
      : new Set([...into.values, ...member.values]);
  return into;
}

/** Every path of a schema below `path`, each with what it holds (unions merged). */
function walk(node: SchemaNode, path: string, into: Map<string, Member>): void {
  for (const branch of [...(node.anyOf ?? []), ...(node.oneOf ?? [])]) walk(branch, path, into);
  if (node.anyOf || node.oneOf) return;
  let member: Member;
  if (node.const !== undefined)
    member = { types: new Set([jsonType(node.const)]), values: new Set([node.const]) };
  else if (node.enum !== undefined) {
    member = { types: new Set(node.enum.map(jsonType)), values: new Set(node.enum) };
  } else if (node.type === undefined) member = { types: new Set([ANY]), values: null };
  else {
    const types = [node.type].flat().map((type) => (type === 'integer' ? 'number' : type));
    member = { types: new Set(types), values: null };
  }
  into.set(path, merge(into.get(path), member));
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    walk(child, `${path}.${name}`, into);
  }
}

/** Each type's members, read from its data schema at its first use (a start-up reads none). */
const membersByType = new Map<string, ReadonlyMap<string, Member>>();

/** The members of an event type's body below `data`; none for a type that is not one. */
function membersOf(type: string): ReadonlyMap<string, Member> {
  if (!isOneOf(EVENT_TYPES, type)) return new Map();
  let members = membersByType.get(type);
  if (members === undefined) {
    const found = new Map<string, Member>();
    walk(EVENT_DATA_SCHEMAS[type] as unknown as SchemaNode, 'data', found);
    found.delete('data');
    members = found;
    membersByType.set(type, members);
  }
  return members;
}

function describe(member: Member): string {
  if (member.values !== null) {
    return `one of ${[...member.values].map((value) => JSON.stringify(value)).join(', ')}`;
  }
  const types = [...member.types];
  return types.length === 1
    ? `a ${types[0]}`
    : `a ${types.slice(0, -1).join(', ')} or ${types.at(-1)}`;
}

/** The members the events of a subscription's types hold, for checking a filter's conditions. */
export class FilterTargets {
  private readonly members = new Map<string, Member>();

  constructor(types: readonly string[]) {
    this.members.set('type', { types: new Set(['string']), values: new Set(types) });
    for (const type of types) {
      for (const [path, member] of membersOf(type)) {
        this.members.set(path, merge(this.members.get(path), member));
      }
    }
  }

  /**
   * Why no event of the types has `path`, naming the nearest path one has (the closest last
   * member first, `data.vatNumber` → `data.object.vatId`, then the closest whole path); null if
   * one has it.
   */
  pathFault(path: string): string | null {
    if (this.members.has(path)) return null;
    const last = (p: string) => p.slice(p.lastIndexOf('.') + 1);
    let nearest = '';
    let best = [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY];
    for (const known of this.members.keys()) {
      const score = [leven(last(path), last(known)), leven(path, known)];
      const better =
        score[0] < best[0] ||
        (score[0] === best[0] && (score[1] < best[1] || (score[1] === best[1] && known < nearest)));
      if (better) [nearest, best] = [known, score];
    }
    return `is no member of an event of the subscription's types; the nearest is ${nearest}`;
  }

  /** Why `operand` can never match under `operator` at `path` (a member); null if it can. */
  operandFault(path: string, operator: string, operand: unknown): string | null {
    const member = this.members.get(path);
    if (member === undefined || member.types.has(ANY)) return null;
    const never = (what: unknown) =>
      `can never match: ${path} is ${describe(member)}, not ${JSON.stringify(what)}`;
    const admits = (value: unknown) =>
      member.types.has(jsonType(value)) && (member.values === null || member.values.has(value));
    switch (operator) {
      case '$eq':
      case '$neq':
        return admits(operand) ? null : never(operand);
      case '$in':
      case '$nin': {
        const impossible = (operand as unknown[]).find((value) => !admits(value));
        return impossible === undefined ? null : never(impossible);
      }
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        return member.types.has(jsonType(operand))
          ? null
          : `can never match: ${path} is ${describe(member)}, no ${jsonType(operand)} to compare`;
      case '$prefix': {
        const starts = (value: unknown) =>
          typeof value === 'string' && value.startsWith(operand as string);
        if (!member.types.has('string')) return never(operand);
        if (member.values !== null && ![...member.values].some(starts)) return never(operand);
        return null;
      }
      default:
        return null;
    }
  }
}
