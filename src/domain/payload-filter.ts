import leven from 'leven';
import { BoundedMap } from '../lib/bounded-map.ts';
import type { FieldErrors } from '../lib/problems.ts';

/**
 * Payload filters: which events of its types a subscription takes, as conditions on the event
 * body (`type`, `data.<member>…`). A filter is checked once, when it is set (`checkFilter`, every
 * fault named by its path inside the filter), and compiled once per stored text into closures
 * (`FilterMatchers`), so emitting walks no JSON and looks up no operator by name.
 *
 * The language (docs/payload-filters.md): a key is a path, `$and` or `$or`; a path's value is a
 * scalar (equality) or an object of operators, all of which must hold. `$neq` and `$nin` are the
 * negations of `$eq` and `$in`, so they also match a missing member. Comparisons hold only
 * between numbers, or between date-times (an operand that is a date-time compares only with a
 * date-time). A member is read only if it is the object's own: a path never reaches a prototype.
 */

type Scalar = string | number | boolean | null;

/** A filter as the API takes and shows it: conditions keyed by path, `$and`, `$or`. */
export type PayloadFilter = { [key: string]: unknown };

/** What a filter is matched against: the event body's `type` and `data`. */
export interface FilterableEvent {
  type: string;
  data: unknown;
}

export type Matcher = (event: FilterableEvent) => boolean;

export const FILTER_LIMITS = { conditions: 20, depth: 4, bytes: 4096 } as const;

export const FILTER_OPERATORS = [
  '$eq',
  '$neq',
  '$in',
  '$nin',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$exists',
  '$prefix',
] as const;
type Operator = (typeof FILTER_OPERATORS)[number];

const COMBINATORS = ['$and', '$or'] as const;

/** `type`, or `data` then one or more members: letters, digits, `_` and `-`. */
const PATH = /^(?:type|data(?:\.[A-Za-z0-9_-]{1,64})+)$/;

/** RFC 3339 full-date, or date-time with its offset (the forms `toISOString` and our data use). */
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:[Zz]|[+-](\d{2}):(\d{2})))?$/;

/** The instant a date-time string names, in ms; null when it is none (a 31 February too). */
export function dateTimeMs(value: string): number | null {
  const match = DATE_TIME.exec(value);
  if (!match) return null;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const calendar = new Date(Date.UTC(year, month - 1, day));
  if (calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) return null;
  if (match[4] !== undefined) {
    const [hour, minute, second] = [Number(match[4]), Number(match[5]), Number(match[6])];
    if (hour > 23 || minute > 59 || second > 59) return null;
    if (match[7] !== undefined && (Number(match[7]) > 23 || Number(match[8]) > 59)) return null;
  }
  const ms = Date.parse(value.toUpperCase());
  return Number.isNaN(ms) ? null : ms;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Infinity and NaN are no JSON: stored, they would read back as null. */
function isScalar(value: unknown): value is Scalar {
  const type = typeof value;
  return (
    value === null ||
    type === 'string' ||
    type === 'boolean' ||
    (type === 'number' && Number.isFinite(value))
  );
}

const isComparable = (value: unknown) =>
  (typeof value === 'number' && Number.isFinite(value)) ||
  (typeof value === 'string' && dateTimeMs(value) !== null);

const isNonFinite = (value: unknown) => typeof value === 'number' && !Number.isFinite(value);
const NON_FINITE = 'is a number beyond the range of a double: JSON cannot carry it back';

const SCALAR = 'must be a string, a number, a boolean or null';
const PATH_RULE = 'is not a path: a key is type, data.<member>[.<member>…], $and or $or';

/** What the events a filter is for can hold (see FilterTargets in filter-catalog.ts). */
export interface FilterCatalog {
  /** The faults of a well-formed filter that no event of the types can match; none if one can. */
  faults(filter: PayloadFilter): FieldErrors;
}

/**
 * Every fault of a filter (`null` is no filter: every event), keyed `filter.<path inside it>`; an
 * empty object when there is none. Bounds: FILTER_LIMITS conditions (one per operator a path is
 * given), levels of nested condition objects, and bytes as JSON. With `catalog`, a well-formed
 * filter that no event of the filter's types can match is a fault too, named where it is.
 */
export function checkFilter(filter: unknown, catalog?: FilterCatalog): FieldErrors {
  const field = 'filter';
  const errors: FieldErrors = {};
  const fault = (at: string, message: string) => {
    errors[at] ??= [message];
  };
  if (filter === null) return errors;
  if (!isObject(filter)) {
    fault(field, 'must be an object of conditions, or null for every event');
    return errors;
  }
  const bytes = Buffer.byteLength(JSON.stringify(filter));
  if (bytes > FILTER_LIMITS.bytes) {
    fault(field, `is ${bytes} bytes as JSON; at most ${FILTER_LIMITS.bytes}`);
    return errors;
  }
  let conditions = 0;
  const level = (object: Record<string, unknown>, at: string, depth: number) => {
    const keys = Object.keys(object);
    if (keys.length === 0) fault(at, 'needs at least one condition (null takes every event)');
    for (const key of keys) {
      const value = object[key];
      const here = `${at}.${key}`;
      if ((COMBINATORS as readonly string[]).includes(key)) {
        if (!Array.isArray(value) || value.length === 0) {
          fault(here, 'must be a non-empty array of condition objects');
        } else if (depth === FILTER_LIMITS.depth) {
          fault(here, `nests deeper than ${FILTER_LIMITS.depth} levels of conditions`);
        } else {
          value.forEach((item, index) => {
            if (isObject(item)) level(item, `${here}.${index}`, depth + 1);
            else fault(`${here}.${index}`, 'must be an object of conditions');
          });
        }
      } else if (key.startsWith('$')) {
        fault(here, `${PATH_RULE}${suggestion(key, COMBINATORS)}`);
      } else if (!PATH.test(key)) {
        fault(here, PATH_RULE);
      } else {
        if (Array.isArray(value)) {
          fault(here, 'an array is no value to compare: use {"$in": […]}');
        } else if (isObject(value)) {
          const operators = Object.keys(value);
          if (operators.length === 0) fault(here, 'needs at least one operator');
          for (const operator of operators) {
            conditions += 1;
            const message = operandFault(operator, value[operator]);
            if (message) fault(`${here}.${operator}`, message);
          }
        } else {
          conditions += 1;
          if (isNonFinite(value)) fault(here, NON_FINITE);
        }
      }
    }
  };
  level(filter, field, 1);
  if (conditions > FILTER_LIMITS.conditions) {
    fault(field, `has ${conditions} conditions; at most ${FILTER_LIMITS.conditions}`);
  }
  // Held against the catalog once well-formed: refused only if no event of the types can match.
  if (catalog !== undefined && Object.keys(errors).length === 0) {
    Object.assign(errors, catalog.faults(filter));
  }
  return errors;
}

/** What is wrong with one operator and its operand, or null. */
function operandFault(operator: string, operand: unknown): string | null {
  const known = (FILTER_OPERATORS as readonly string[]).includes(operator);
  if (known && (isNonFinite(operand) || (Array.isArray(operand) && operand.some(isNonFinite)))) {
    return NON_FINITE;
  }
  switch (operator as Operator) {
    case '$eq':
    case '$neq':
      return isScalar(operand) ? null : SCALAR;
    case '$in':
    case '$nin':
      if (!Array.isArray(operand) || operand.length === 0) {
        return 'must be a non-empty array of strings, numbers, booleans or nulls';
      }
      return operand.every(isScalar) ? null : 'must hold only strings, numbers, booleans or nulls';
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte':
      return isComparable(operand)
        ? null
        : 'must be a number or an ISO 8601 date-time (2026-05-01 or 2026-05-01T09:00:00Z)';
    case '$exists':
      return typeof operand === 'boolean' ? null : 'must be true or false';
    case '$prefix':
      return typeof operand === 'string' && operand.length > 0
        ? null
        : 'must be a non-empty string';
    default:
      return operator.startsWith('$')
        ? `is not an operator: use one of ${FILTER_OPERATORS.join(', ')}${suggestion(operator, FILTER_OPERATORS)}`
        : 'is not an operator: a nested member is written in the path (data.<member>.<member>)';
  }
}

/**
 * The hint for a misspelt name: the known names within edit distance 2, closest first; a tie goes
 * to a name that only adds letters to what was typed (`$ge` is `$gte`, not `$gt`), then to the
 * longer common prefix (`$ne` is `$neq`, not `$in`); names still tied are all named (`$t`: `$gt`
 * or `$lt`).
 */
function suggestion(word: string, known: readonly string[]): string {
  const typed = word.toLowerCase();
  const ranked = known
    .map((name) => ({
      name,
      distance: leven(typed, name),
      // 0 when the name holds every typed letter in order (a letter left out), else 1.
      changes: isSubsequence(typed, name) ? 0 : 1,
      prefix: commonPrefix(typed, name),
    }))
    .filter((candidate) => candidate.distance <= 2);
  if (ranked.length === 0) return '';
  ranked.sort((a, b) => a.distance - b.distance || a.changes - b.changes || b.prefix - a.prefix);
  const [best] = ranked;
  const tied = ranked.filter(
    (c) => c.distance === best.distance && c.changes === best.changes && c.prefix === best.prefix,
  );
  return ` (did you mean ${tied.map((c) => c.name).join(' or ')}?)`;
}

function isSubsequence(typed: string, name: string): boolean {
  let at = 0;
  for (const letter of name) if (letter === typed[at]) at++;
  return at === typed.length;
}

function commonPrefix(a: string, b: string): number {
  let length = 0;
  while (length < a.length && length < b.length && a[length] === b[length]) length++;
  return length;
}

/** Absent: a path that names no own member (or walks through a non-object). */
export const MISSING = Symbol('missing');

type Reader = (event: FilterableEvent) => unknown;

function reader(path: string): Reader {
  if (path === 'type') return (event) => event.type;
  const members = path.split('.').slice(1);
  return (event) => {
    let value: unknown = event.data;
    for (const member of members) {
      if (!isObject(value) || !Object.hasOwn(value, member)) return MISSING;
      value = value[member];
    }
    return value;
  };
}

type Test = (value: unknown) => boolean;

/** A test of one operator against its (checked) operand. */
function operatorTest(operator: Operator, operand: unknown): Test {
  switch (operator) {
    case '$eq':
      return (value) => value === operand;
    case '$neq':
      return (value) => value !== operand;
    case '$in': {
      const set = new Set(operand as Scalar[]);
      return (value) => isScalar(value) && set.has(value);
    }
    case '$nin': {
      const set = new Set(operand as Scalar[]);
      return (value) => !(isScalar(value) && set.has(value));
    }
    case '$gt':
      return comparison(operand as number | string, (order) => order > 0);
    case '$gte':
      return comparison(operand as number | string, (order) => order >= 0);
    case '$lt':
      return comparison(operand as number | string, (order) => order < 0);
    case '$lte':
      return comparison(operand as number | string, (order) => order <= 0);
    case '$exists':
      return operand === true ? (value) => value !== MISSING : (value) => value === MISSING;
    case '$prefix': {
      const prefix = operand as string;
      return (value) => typeof value === 'string' && value.startsWith(prefix);
    }
  }
}

/** Numbers compare with numbers, date-times with date-times; anything else never holds. */
function comparison(operand: number | string, holds: (order: number) => boolean): Test {
  const order = (a: number, b: number) => (a < b ? -1 : a > b ? 1 : 0);
  if (typeof operand === 'number') {
    return (value) => typeof value === 'number' && holds(order(value, operand));
  }
  const at = dateTimeMs(operand) as number;
  return (value) => {
    if (typeof value !== 'string') return false;
    const ms = dateTimeMs(value);
    return ms !== null && holds(order(ms, at));
  };
}

/** One condition of a filter: a path, an operator's test, and the error key it stands at. */
export interface Condition {
  path: string;
  operator: string;
  operand: unknown;
  /** `filter.<where in the filter>.<path>[.<operator>]`: where a fault of it is reported. */
  key: string;
  /** The key of its path alone (`filter.<where>.<path>`), for a path no event has. */
  pathKey: string;
  test: (value: unknown) => boolean;
}

/** A filter as conditions combined: all of them, or any of them. */
export type FilterTree = { all: FilterTree[] } | { any: FilterTree[] } | Condition;

/**
 * A well-formed filter (see checkFilter) as its tree of conditions: what the matcher is compiled
 * from (compileFilter) and what the catalog check searches over (filter-witness.ts).
 */
export function filterTree(filter: PayloadFilter, at = 'filter'): FilterTree {
  const all: FilterTree[] = [];
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$and' || key === '$or') {
      const items = (value as PayloadFilter[]).map((item, i) =>
        filterTree(item, `${at}.${key}.${i}`),
      );
      all.push(key === '$and' ? { all: items } : { any: items });
      continue;
    }
    const pathKey = `${at}.${key}`;
    // A scalar is equality, keyed by its path; an operator is keyed by its own name.
    const scalar = !isObject(value);
    const operators = scalar ? [['$eq', value] as const] : Object.entries(value);
    for (const [operator, operand] of operators) {
      all.push({
        path: key,
        operator,
        operand,
        key: scalar ? pathKey : `${pathKey}.${operator}`,
        pathKey,
        test: operatorTest(operator as Operator, operand),
      });
    }
  }
  return { all };
}

/** A checked filter as one function of the event; `null` matches every event. */
export function compileFilter(filter: PayloadFilter | null): Matcher {
  return filter === null ? () => true : matcherOf(filterTree(filter));
}

function matcherOf(tree: FilterTree): Matcher {
  if ('any' in tree) {
    const items = tree.any.map(matcherOf);
    return (event) => items.some((item) => item(event));
  }
  const items = 'all' in tree ? tree.all : [tree];
  const parts: Matcher[] = [];
  for (let i = 0; i < items.length; ) {
    const first = items[i];
    if ('all' in first || 'any' in first) {
      parts.push(matcherOf(first));
      i++;
      continue;
    }
    // The conditions on one path (one operator object) read its value once.
    const tests: Test[] = [];
    for (; i < items.length; i++) {
      const item = items[i];
      if ('all' in item || 'any' in item || item.pathKey !== first.pathKey) break;
      tests.push(item.test);
    }
    const read = reader(first.path);
    parts.push(
      tests.length === 1
        ? (event) => tests[0](read(event))
        : (event) => {
            const found = read(event);
            return tests.every((test) => test(found));
          },
    );
  }
  return parts.length === 1 ? parts[0] : (event) => parts.every((part) => part(event));
}

/**
 * Compiled matchers by stored filter text, shared by every subscription with the same filter
 * (BoundedMap: the working set is the filters of the tenants emitting, well under `limit`). A
 * stored filter was checked when it was set.
 */
export class FilterMatchers {
  private readonly compiled: BoundedMap<string, Matcher>;

  constructor(limit = 10_000) {
    this.compiled = new BoundedMap(limit);
  }

  /** Whether the event passes the stored filter (null: no filter). */
  matches(stored: string | null, event: FilterableEvent): boolean {
    if (stored === null) return true;
    const matcher =
      this.compiled.get(stored) ??
      this.compiled.remember(stored, compileFilter(JSON.parse(stored) as PayloadFilter));
    return matcher(event);
  }
}
