import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../domain/schema-kit.ts';
import type { Services } from '../../services/index.ts';
import { problems } from '../schemas.ts';

/** What every admin route plugin receives. */
export interface AdminRouteOptions {
  services: Services;
}

/** The errors every admin operation documents. */
export const adminProblems = problems(401, 404, 409, 422);

export const Money = Type.Integer({ minimum: 0, maximum: 2_000_000_000 });
export const Currency = Type.String({ format: 'currency-code', pattern: '^[A-Z]{3}$' });

/** A `{ to }` body naming the target status. */
export const Transition = <T extends readonly string[]>(values: T) =>
  Type.Object({ to: StringEnum(values) }, { additionalProperties: false });
