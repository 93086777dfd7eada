import { setFlagsFromString } from 'node:v8';

/**
 * V8 flags for the serving processes, set before anything else is loaded (each entry point imports
 * this first; a cluster's processes run the same entry point).
 *
 * No allocation-site pretenuring: once a query's rows outlived one scavenge (they are all alive
 * while it runs), V8 allocated every later page's rows directly in the old generation, and the
 * mark-compacts that followed stalled the latency tail. What the API keeps past a request
 * (caches, pools) is small, so pretenuring has nothing to gain here.
 */
setFlagsFromString('--no-allocation-site-pretenuring');
