import leven from 'leven';
import type { FieldErrors } from '../lib/problems.ts';
import { EVENT_DATA_SCHEMAS } from './event-schemas.ts';
import {
  assuming,
  conditionsOf,
  type SchemaNode,
  SEARCH_STEPS,
  type SearchBudget,
  witness,
} from './filter-witness.ts';
import {
  type Condition,
  type FilterTree,
  filterTree,
  type PayloadFilter,
} from './payload-filter.ts';
import { EVENT_TYPES, isOneOf } from './states.ts';

/**
 * A payload filter held against the event catalog: refused exactly when no body the schema of any
 * of the subscription's types allows can match it (see witness), and then named where it fails:
 * each condition without which it could match (a path no event has, with the nearest one there
 * is; an operand its member never holds), else the conditions that cannot hold together.
 */

/** What a path of an event body can hold: JSON types, and the only values when they are listed. */
interface Member {
  types: Set<string>;
  /** Null: any value of its types. */
  values: Set<unknown> | null;
}

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
  private readonly types: readonly string[];

  constructor(types: readonly string[]) {
    this.types = types.filter((type) => isOneOf(EVENT_TYPES, type));
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

  /**
   * A body of one of the types that `filter` matches (the proof that it can), null when there is
   * none, undefined when the search's budget ran out first.
   */
  witness(filter: PayloadFilter): { type: string; data: unknown } | null | undefined {
    return this.witnessOf(filterTree(filter), { steps: SEARCH_STEPS });
  }

  /**
   * The faults of a filter none of the types' events can match, by key; none if one can, or if
   * telling would take more than one check's budget (a filter is never refused on a guess).
   */
  faults(filter: PayloadFilter): FieldErrors {
    const tree = filterTree(filter);
    const budget = { steps: SEARCH_STEPS };
    if (this.witnessOf(tree, budget) !== null) return {};
    const errors: FieldErrors = {};
    for (const condition of conditionsOf(tree)) {
      // Only a condition without which the filter could match is named.
      if (!this.witnessOf(assuming(tree, condition), budget)) continue;
      const unknown = this.pathFault(condition.path);
      if (unknown !== null) errors[condition.pathKey] ??= [unknown];
      else if (this.witnessOf(condition, budget) === null)
        errors[condition.key] ??= [this.never(condition)];
      else errors[condition.key] ??= [TOGETHER];
    }
    if (Object.keys(errors).length === 0) errors.filter = [NEVER];
    return errors;
  }

  /** See witness: the first type with a body, undefined if one's search ran out of budget. */
  private witnessOf(
    tree: FilterTree,
    budget: SearchBudget,
  ): { type: string; data: unknown } | null | undefined {
    let unknown = false;
    for (const type of this.types) {
      const body = witness(tree, bodySchema(type), budget);
      if (body === undefined) unknown = true;
      else if (body !== null) return { type, data: body.data };
    }
    return unknown ? undefined : null;
  }

  /** Why a condition alone matches no event of the types. */
  private never(condition: Condition): string {
    const member = this.members.get(condition.path) as Member;
    const operand = JSON.stringify(condition.operand);
    return `can never match: ${condition.path} is ${describe(member)} in the events of the subscription's types, and ${condition.operator} ${operand} holds for none`;
  }
}

const TOGETHER =
  "can never match beside the filter's other conditions: no event of the subscription's types holds them all";
const NEVER = "can never match: no event of the subscription's types holds its conditions together";

/** The body of an event of `type` as the filter reads it: `type` and `data`. */
const bodySchemas = new Map<string, SchemaNode>();
function bodySchema(type: string): SchemaNode {
  let schema = bodySchemas.get(type);
  if (schema === undefined) {
    const data = EVENT_DATA_SCHEMAS[type as keyof typeof EVENT_DATA_SCHEMAS] as SchemaNode;
    schema = {
      type: 'object',
      properties: { type: { type: 'string', const: type }, data },
      required: ['type', 'data'],
      additionalProperties: false,
    };
    bodySchemas.set(type, schema);
  }
  return schema;
}
