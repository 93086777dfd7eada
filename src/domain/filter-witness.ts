import Ajv, { type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { type Condition, dateTimeMs, type FilterTree, MISSING } from './payload-filter.ts';

/**
 * Whether a filter can match an event at all: a search for a body that an event type's schema
 * allows and the filter matches, its witness. Only the filter's paths (and the objects above them)
 * are chosen; each takes a value of its schema, one of the objects its schema allows, or none
 * when it may be absent. A path's values are tried from what can change a condition's answer:
 * its schema's constants and enums, null where allowed, each operand of the filter on that path
 * and its neighbours (±1, ±0.5, a millisecond either side of a date-time), a prefix completed,
 * and a value equal to no operand; each kept only if the schema's own validator takes it, and one
 * per distinct set of answers it gives the conditions on its path. A condition answered false for
 * every completion of what is chosen so far cuts the search there (three-valued evaluation).
 */

/** A JSON Schema node, as the event schemas (TypeBox) write them. */
export interface SchemaNode {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  properties?: Record<string, SchemaNode>;
  required?: string[];
  additionalProperties?: boolean | SchemaNode;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
}

/** Every condition of a tree, in the order it is written. */
export function conditionsOf(tree: FilterTree): Condition[] {
  if ('all' in tree) return tree.all.flatMap(conditionsOf);
  if ('any' in tree) return tree.any.flatMap(conditionsOf);
  return [tree];
}

/** The tree with `condition` taken as holding (to find which conditions refuse every body). */
export function assuming(tree: FilterTree, condition: Condition): FilterTree {
  if ('all' in tree) return { all: tree.all.map((item) => assuming(item, condition)) };
  if ('any' in tree) return { any: tree.any.map((item) => assuming(item, condition)) };
  return tree === condition ? { all: [] } : tree;
}

/** What an object or an array stands as for a condition: no scalar, but present. */
const AN_OBJECT = Object.freeze({});
const AN_ARRAY = Object.freeze([]);

/**
 * Three-valued: whether the tree holds for every completion of `values` (true), for none (false),
 * or it depends on paths not chosen yet (undefined).
 */
function verdict(tree: FilterTree, values: ReadonlyMap<string, unknown>): boolean | undefined {
  if ('all' in tree) {
    let open = false;
    for (const item of tree.all) {
      const holds = verdict(item, values);
      if (holds === false) return false;
      if (holds === undefined) open = true;
    }
    return open ? undefined : true;
  }
  if ('any' in tree) {
    let open = false;
    for (const item of tree.any) {
      const holds = verdict(item, values);
      if (holds === true) return true;
      if (holds === undefined) open = true;
    }
    return open ? undefined : false;
  }
  return values.has(tree.path) ? tree.test(values.get(tree.path)) : undefined;
}

const branches = new WeakMap<SchemaNode, SchemaNode[]>();
/**
 * A schema as its branches without unions, one JSON type each (an untyped one is any value);
 * the same objects at every call, so each branch's validator is compiled once.
 */
function branchesOf(node: SchemaNode): SchemaNode[] {
  let found = branches.get(node);
  if (found !== undefined) return found;
  const union = [...(node.anyOf ?? []), ...(node.oneOf ?? [])];
  if (union.length > 0) found = union.flatMap(branchesOf);
  else if (node.const !== undefined || node.enum !== undefined) found = [node];
  else if (Array.isArray(node.type)) found = node.type.map((type) => ({ ...node, type }));
  else if (node.type === undefined && node.properties !== undefined) {
    found = [{ ...node, type: 'object' }];
  } else found = [node];
  branches.set(node, found);
  return found;
}

const ajv = addFormats.default(new Ajv.default({ strict: false }));
const validators = new WeakMap<SchemaNode, ValidateFunction>();
/** Whether the schema node's own validator takes `value` (the judge of what a schema allows). */
function allows(node: SchemaNode, value: unknown): boolean {
  let validate = validators.get(node);
  if (validate === undefined) {
    validate = ajv.compile(node);
    validators.set(node, validate);
  }
  return validate(value);
}

const DATES = ['2026-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z'];

/** The strings worth trying for a string branch, given the operands on its path. */
function stringCandidates(branch: SchemaNode, operands: readonly unknown[]): string[] {
  const length = Math.max(branch.minLength ?? 1, 1);
  const fresh = ['~'.repeat(length), `${'~'.repeat(length - 1)}!`, 'x'.repeat(length)];
  const bases = [...fresh, ...DATES];
  const found: string[] = [...bases];
  for (const operand of operands) {
    if (typeof operand !== 'string') continue;
    found.push(operand, `${operand}x`);
    // A prefix completed into each base (a date-time begun, a code of a fixed length).
    for (const base of bases)
      if (operand.length < base.length) found.push(operand + base.slice(operand.length));
    const ms = dateTimeMs(operand);
    if (ms !== null) {
      for (const at of [ms - 1, ms, ms + 1]) {
        const iso = new Date(at).toISOString();
        found.push(iso);
        bases.push(iso);
      }
    }
  }
  return found;
}

/** The numbers worth trying: each operand and its neighbours, and the branch's bounds. */
function numberCandidates(branch: SchemaNode, operands: readonly unknown[]): number[] {
  const found = [0, 1, -1];
  if (branch.minimum !== undefined) found.push(branch.minimum, branch.minimum + 1);
  if (branch.maximum !== undefined) found.push(branch.maximum, branch.maximum - 1);
  for (const operand of operands) {
    if (typeof operand !== 'number') continue;
    const near = [operand, operand - 1, operand + 1, operand - 0.5, operand + 0.5];
    found.push(...near, Math.floor(operand), Math.ceil(operand));
  }
  return found.filter((n) => Number.isFinite(n));
}

/** What a path is chosen to be: absent, a value, or an object of one branch of its schema. */
type Choice =
  | { kind: 'missing' }
  | { kind: 'value'; value: unknown }
  | { kind: 'object'; branch: SchemaNode };

const NONE: Choice = { kind: 'missing' };
/** An object of any members (where a schema says nothing of a path's value). */
const ANY_OBJECT: SchemaNode = {};

const branchKeys = new WeakMap<SchemaNode, number>();
let branchCount = 0;
/** A number for each object branch: two choices of one branch are one. */
function branchKey(branch: SchemaNode): number {
  let key = branchKeys.get(branch);
  if (key === undefined) {
    key = branchCount++;
    branchKeys.set(branch, key);
  }
  return key;
}

/** The filter's paths as a tree of members below the body, each with its conditions. */
interface PathNode {
  path: string;
  name: string;
  parent: string | null;
  children: string[];
  conditions: Condition[];
}

function pathNodes(conditions: readonly Condition[]): PathNode[] {
  const nodes = new Map<string, PathNode>();
  const ensure = (path: string): PathNode => {
    let node = nodes.get(path);
    if (node !== undefined) return node;
    const cut = path.lastIndexOf('.');
    const parent = cut < 0 ? null : path.slice(0, cut);
    node = { path, name: path.slice(cut + 1), parent, children: [], conditions: [] };
    nodes.set(path, node);
    if (parent !== null) ensure(parent).children.push(path);
    return node;
  };
  for (const condition of conditions) ensure(condition.path).conditions.push(condition);
  // Parents before their children.
  return [...nodes.values()].sort((a, b) => a.path.split('.').length - b.path.split('.').length);
}

/** A member's schema, if the object's schema names it: its own members only, never `toString`. */
function propertyOf(branch: SchemaNode, name: string): SchemaNode | undefined {
  const properties = branch.properties;
  return properties !== undefined && Object.hasOwn(properties, name) ? properties[name] : undefined;
}

/** What the conditions on a path see of a choice. */
function seen(choice: Choice): unknown {
  if (choice.kind === 'missing') return MISSING;
  if (choice.kind === 'object') return AN_OBJECT;
  return choice.value;
}

/**
 * How many steps the searches of one check may take together (`steps` counts down): a filter
 * whose search would take longer is not refused for it (see witness), so a check's time is
 * bounded whatever filter is sent.
 */
export interface SearchBudget {
  steps: number;
}
export const SEARCH_STEPS = 100_000;

/** The conditions that must all hold for the tree to: its own, and those of `all`s within. */
function conjuncts(tree: FilterTree): Condition[] {
  if ('all' in tree) return tree.all.flatMap(conjuncts);
  return 'any' in tree ? [] : [tree];
}

/**
 * A body `root` (an object schema) allows that `tree` matches, null when there is none, or
 * undefined when `budget` ran out first. The body holds the chosen paths and, for every other
 * required member, the least value its schema takes (see sampleOf).
 */
export function witness(
  tree: FilterTree,
  root: SchemaNode,
  budget: SearchBudget = { steps: SEARCH_STEPS },
): Record<string, unknown> | null | undefined {
  // A condition that must hold and never can, alone, ends it at once (the common refusal).
  if ('all' in tree || 'any' in tree) {
    for (const condition of conjuncts(tree)) {
      if (witness(condition, root, budget) === null) return null;
    }
  }
  const nodes = pathNodes(conditionsOf(tree));
  const byPath = new Map(nodes.map((node) => [node.path, node]));
  const choices = new Map<string, Choice>();
  const values = new Map<string, unknown>();

  // A path's choices depend only on the branch of the object above it: made once for each.
  const made = new Map<string, Map<SchemaNode, Choice[]>>();
  const options = (node: PathNode): Choice[] => {
    const parent =
      node.parent === null ? { kind: 'object', branch: root } : choices.get(node.parent);
    if (parent?.kind !== 'object') return [NONE];
    let byBranch = made.get(node.path);
    if (byBranch === undefined) {
      byBranch = new Map();
      made.set(node.path, byBranch);
    }
    let found = byBranch.get(parent.branch);
    if (found === undefined) {
      found = optionsUnder(node, parent.branch);
      byBranch.set(parent.branch, found);
    }
    return found;
  };
  const optionsUnder = (node: PathNode, branch: SchemaNode): Choice[] => {
    const schema = propertyOf(branch, node.name);
    let candidates: Choice[];
    if (schema === undefined) {
      if (branch.additionalProperties === false) return [NONE];
      candidates = [NONE, ...choicesOf({}, node)];
    } else {
      const required = branch.required?.includes(node.name) ?? false;
      candidates = [...(required ? [] : [NONE]), ...choicesOf(schema, node)];
    }
    // One choice per set of answers it gives this path's conditions (an object with members
    // chosen below it is one per branch).
    const kept = new Set<string>();
    return candidates.filter((choice) => {
      const answers = node.conditions.map((c) => (c.test(seen(choice)) ? 1 : 0)).join('');
      const key =
        choice.kind === 'object' && node.children.length > 0
          ? `object ${branchKey(choice.branch)}`
          : `${choice.kind === 'object' ? 'value' : choice.kind} ${answers}`;
      if (kept.has(key)) return false;
      kept.add(key);
      return true;
    });
  };

  const search = (index: number): boolean | undefined => {
    if (--budget.steps < 0) return undefined;
    const holds = verdict(tree, values);
    if (holds === false) return false;
    if (index === nodes.length) return holds === true;
    const node = nodes[index];
    for (const choice of options(node)) {
      choices.set(node.path, choice);
      values.set(node.path, seen(choice));
      const found = search(index + 1);
      if (found !== false) return found;
    }
    choices.delete(node.path);
    values.delete(node.path);
    return false;
  };

  const found = search(0);
  if (found !== true) return found === false ? null : undefined;
  const build = (branch: SchemaNode, prefix: string | null): Record<string, unknown> => {
    const body: Record<string, unknown> = {};
    const names = new Set([
      ...Object.keys(branch.properties ?? {}),
      ...(prefix === null
        ? nodes.filter((n) => n.parent === null).map((n) => n.name)
        : (byPath.get(prefix)?.children ?? []).map((path) => path.slice(prefix.length + 1))),
    ]);
    for (const name of names) {
      const path = prefix === null ? name : `${prefix}.${name}`;
      const choice = choices.get(path);
      if (choice === undefined) {
        const schema = propertyOf(branch, name);
        if (schema !== undefined && branch.required?.includes(name)) body[name] = sampleOf(schema);
      } else if (choice.kind === 'value') body[name] = choice.value;
      else if (choice.kind === 'object') body[name] = build(choice.branch, path);
    }
    return body;
  };
  return build(root, null);
}

/** The choices a schema offers a path: its objects by branch, and the values worth trying. */
function choicesOf(schema: SchemaNode, node: PathNode): Choice[] {
  const operands = node.conditions.flatMap((c) =>
    Array.isArray(c.operand) ? c.operand : [c.operand],
  );
  const choices: Choice[] = [];
  for (const branch of branchesOf(schema)) {
    const tried: unknown[] = [];
    if (branch.const !== undefined) tried.push(branch.const);
    else if (branch.enum !== undefined) tried.push(...branch.enum);
    else if (branch.type === 'object') {
      choices.push({ kind: 'object', branch });
      continue;
    } else if (branch.type === 'array') tried.push(sampleOf(branch));
    else if (branch.type === 'string') tried.push(...stringCandidates(branch, operands));
    else if (branch.type === 'number' || branch.type === 'integer')
      tried.push(...numberCandidates(branch, operands));
    else if (branch.type === 'boolean') tried.push(true, false);
    else if (branch.type === 'null') tried.push(null);
    else {
      // Any value: every kind a condition tells apart.
      choices.push({ kind: 'object', branch: ANY_OBJECT });
      tried.push(null, true, false, AN_ARRAY, ...numberCandidates({}, operands));
      tried.push(...stringCandidates({}, operands));
    }
    for (const value of tried) {
      if (value === AN_ARRAY || allows(branch, value)) choices.push({ kind: 'value', value });
    }
  }
  return choices;
}

/** The least value a schema takes: an object of its required members, the first of a union. */
function sampleOf(schema: SchemaNode): unknown {
  const [branch] = branchesOf(schema);
  if (branch.const !== undefined) return branch.const;
  if (branch.enum !== undefined) return branch.enum[0];
  switch (branch.type) {
    case 'object':
      return Object.fromEntries(
        (branch.required ?? []).map((name) => [name, sampleOf(propertyOf(branch, name) ?? {})]),
      );
    case 'array':
      return [];
    case 'string':
      return branch.format === 'date-time' ? DATES[0] : 'x'.repeat(branch.minLength ?? 0);
    case 'number':
    case 'integer':
      return branch.minimum ?? 0;
    case 'boolean':
      return false;
    default:
      return null;
  }
}
