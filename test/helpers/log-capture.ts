import { Writable } from 'node:stream';
import pino from 'pino';

/** A logger whose JSON lines land in an array, parsed. */
export function captureLogs(level: pino.Level) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: pino({ level }, stream) };
}
