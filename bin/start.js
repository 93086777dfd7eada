// `npm start`, run from the compiled sources (see compiled.js).
import { importSource } from './compiled.js';

await importSource('main');
