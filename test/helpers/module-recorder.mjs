// Loaded with `node --import` in a child process: appends the URL of every module resolved through
// the ES module loader to the file named by MODULE_LOG (tests look for what a process loaded).
import { register } from 'node:module';

register('./module-recorder-hooks.mjs', import.meta.url);
