import { setFlagsFromString } from 'node:v8';

/**
 * V8 flags for the serving processes, set before anything else is loaded (each entry point imports
 * this first; a cluster's processes run the same entry point).
 *
 * No allocation-site pretenuring: V8 starts allocating an allocation site's objects directly in
 * the old generation once most of them outlived a scavenge. A query's rows are all alive while it
 * runs, so one scavenge in the middle of a page was enough for pg's row arrays; from then on
 * each page's rows were allocated old (in every measured window), kept their young strings alive
 * through every scavenge, and the whole page (40 KB) was copied into the old generation: 46 MB/s
 * at 1,000 pages/s, a mark-compact every second or two, its concurrent marking on a core, and
 * 20-50 ms stalls in the open-loop tail (0.2 MB/s and a 6.8 ms p99 without pretenuring). What
 * the API keeps past a request (caches, pools) is small, so there is nothing to gain from it.
 */
setFlagsFromString('--no-allocation-site-pretenuring');
