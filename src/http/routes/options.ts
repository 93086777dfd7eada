import type { Config } from '../../config.ts';
import type { Services } from '../../services/index.ts';
import type { Writes } from '../pipeline/idempotency.ts';

/** What every public route plugin receives. */
export interface RouteOptions {
  config: Config;
  services: Services;
  /** The unit of work of a write (Idempotency-Key included). */
  writes: Writes;
}
