// `npm run bench:image`: the image's size, and how long a container takes from `podman run` to
// its first `/readyz` 200 on the embedded database, on a new volume (the first start migrates)
// and on one already used. Builds the image as `npm run test:image` does (test/image/podman.ts).
//
//   npm run bench:image [-- --runs 5]
import { parseArgs } from 'node:util';
import {
  buildImage,
  IMAGE,
  podman,
  podmanQuietly,
  runOnLoopback,
  unique,
} from '../test/image/podman.ts';
import { freePort } from './processes.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' } } });
const runs = Number(values.runs);

/** Milliseconds from `podman run` to the first 200 of /readyz (polled every 20 ms). */
async function startToReady(volume: string): Promise<number> {
  const port = await freePort();
  const name = unique('bench');
  const started = performance.now();
  await runOnLoopback({ name, port, volume });
  try {
    for (;;) {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
      if (response?.status === 200) return performance.now() - started;
      if (performance.now() - started > 60_000) throw new Error(`${name}: not ready in 60 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await podmanQuietly(['rm', '--force', '--time', '5', name]);
  }
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

await buildImage();
const [image] = JSON.parse(await podman(['image', 'inspect', IMAGE]));
const fresh: number[] = [];
const reused: number[] = [];
for (let i = 0; i < runs; i++) {
  const volume = unique('bench-data');
  try {
    fresh.push(await startToReady(volume));
    reused.push(await startToReady(volume));
  } finally {
    await podmanQuietly(['volume', 'rm', '--force', volume]);
  }
}
const row = (label: string, ms: number[]) =>
  `| ${label} | ${Math.round(median(ms))} ms | ${Math.round(Math.min(...ms))}-${Math.round(Math.max(...ms))} ms |`;
console.log(`Image ${IMAGE}: ${(image.Size / 1e6).toFixed(0)} MB (${image.Size} bytes)\n`);
console.log(`| podman run to /readyz 200, ${runs} runs | median | range |`);
console.log('|---|---|---|');
console.log(row('new volume (migrates)', fresh));
console.log(row('volume used before', reused));
