// A transformation sandbox's thread (src/transformations/runner.ts starts it), run from the
// compiled sources like every entry point (see compiled.js).
import { importSource } from './compiled.js';

await importSource('transformations/thread');
