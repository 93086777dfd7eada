#!/usr/bin/env node
// The operator CLI runs the TypeScript sources directly: tsx (a runtime dependency) compiles them
// on the fly, so `npm ci` is the only set-up step.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
