/**
 * The ceiling of the delivery rows: bare undici `request()` POSTs on one keep-alive `Agent` that
 * trusts the bench CA, at the worker's concurrency, to the same receiver, with a body of the size
 * a delivery sends. No database, no signing: what one Node process can push through HTTPS here.
 *
 *   BENCH_RAW_URLS=<url,url…> BENCH_RAW_COUNT=<n> BENCH_RAW_CONCURRENCY=<n> BENCH_RAW_CA=<pem>
 *   BENCH_RAW_BODY_BYTES=<n> [BENCH_RAW_WARM=<n>] node --import tsx bench/raw-sender.ts
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent, request } from 'undici';
import { cpuSplit, cpuSplitWords } from './processes.ts';

const urls = (process.env.BENCH_RAW_URLS ?? '').split(',').filter(Boolean);
const count = Number(process.env.BENCH_RAW_COUNT);
const concurrency = Number(process.env.BENCH_RAW_CONCURRENCY);
const bodyBytes = Number(process.env.BENCH_RAW_BODY_BYTES);
if (urls.length === 0 || !(count > 0) || !(concurrency > 0) || !(bodyBytes > 0)) {
  process.stderr.write('raw-sender: BENCH_RAW_URLS, _COUNT, _CONCURRENCY, _BODY_BYTES needed\n');
  process.exit(2);
}
const ca = [...rootCertificates, readFileSync(process.env.BENCH_RAW_CA as string, 'utf8')];
const agent = new Agent({ connect: { ca }, keepAliveTimeout: 10_000 });
const body = `{"id":"raw","data":"${'x'.repeat(Math.max(0, bodyBytes - 22))}"}`;

let next = 0;
let failed = 0;
async function lane(until: number): Promise<void> {
  while (next < until) {
    const url = urls[next % urls.length];
    next += 1;
    try {
      const response = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body,
      });
      await response.body.dump();
      if (response.statusCode >= 300) failed += 1;
    } catch {
      failed += 1;
    }
  }
}
// The floor of a delivery's CPU: what this process spends on one bare POST once its
// connections are open (the TLS handshakes of the first ones are not a delivery's cost), or after
// BENCH_RAW_WARM POSTs (the drain's A/B counts from the same share of its deliveries on).
const warm =
  process.env.BENCH_RAW_WARM === undefined
    ? Math.min(Math.floor(count / 5), concurrency * 4)
    : Number(process.env.BENCH_RAW_WARM);
await Promise.all(Array.from({ length: concurrency }, () => lane(warm)));
const cpuBefore = process.cpuUsage();
const splitBefore = cpuSplit(process.pid);
await Promise.all(Array.from({ length: concurrency }, () => lane(count)));
const cpu = process.cpuUsage(cpuBefore);
const splitAfter = cpuSplit(process.pid);
await agent.close();
const cpuUsPerPost = (cpu.user + cpu.system) / (count - warm);
const split =
  splitBefore === null || splitAfter === null
    ? undefined
    : cpuSplitWords(splitBefore, splitAfter, count - warm);
process.stdout.write(`${JSON.stringify({ sent: count, failed, cpuUsPerPost, split })}\n`);
