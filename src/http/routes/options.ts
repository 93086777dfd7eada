import type { Config } from '../../config.ts';
import type { Services } from '../../services/index.ts';

/** What every public route plugin receives. */
export interface RouteOptions {
  config: Config;
  services: Services;
}
