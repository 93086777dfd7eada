/**
 * Summary of a V8 CPU profile (`.cpuprofile`, as written by `--cpu-prof` or the inspector):
 * self time by function, self time by package/area, and inclusive time of the app's own
 * functions (`src/`). Also runnable on its own: `npx tsx bench/profile.ts file.cpuprofile`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function shortUrl(url: string): string {
  if (url === '') return '';
  let path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const modules = path.lastIndexOf('/node_modules/');
  if (modules >= 0) return path.slice(modules + '/node_modules/'.length);
  const src = path.lastIndexOf('/src/');
  if (src >= 0) path = path.slice(src + 1);
  return path;
}

function area(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return '(garbage collector)';
    if (functionName === '(program)') return '(program: V8/native, unattributed)';
    if (functionName === '(idle)') return '(idle)';
    return '(V8 builtins / native)';
  }
  if (url.startsWith('node:')) return 'node: core';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + '/node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  const src = url.lastIndexOf('/src/');
  if (src >= 0)
    return `app ${url
      .slice(src + 1)
      .split('/')
      .slice(0, 2)
      .join('/')}`;
  return shortUrl(url);
}

function label(frame: CallFrame): string {
  const name = frame.functionName || '(anonymous)';
  const where = shortUrl(frame.url);
  // tsx-compiled app files report every function on line 1: the file name is what helps there.
  if (where && frame.lineNumber === 0) return `${name} ${where}`;
  return where ? `${name} ${where}:${frame.lineNumber + 1}` : name;
}

export interface ProfileSummary {
  totalMs: number;
  busyMs: number;
  topSelf: Array<{ name: string; ms: number; pct: number }>;
  areas: Array<{ name: string; ms: number; pct: number }>;
  appInclusive: Array<{ name: string; ms: number; pct: number }>;
}

/** Percentages are of busy time (all samples except `(idle)`). */
export function summarizeProfile(profile: CpuProfile, top = 20): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const self = new Map<string, number>();
  const areas = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    // A sample's time is the gap to the next one (the last sample gets the previous gap).
    const us = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    const leaf = byId.get(profile.samples[i]);
    if (!leaf) continue;
    total += us;
    if (leaf.callFrame.functionName === '(idle)') {
      idle += us;
      continue;
    }
    const leafLabel = label(leaf.callFrame);
    self.set(leafLabel, (self.get(leafLabel) ?? 0) + us);
    const leafArea = area(leaf.callFrame);
    areas.set(leafArea, (areas.get(leafArea) ?? 0) + us);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const frame = (byId.get(id) as ProfileNode).callFrame;
      if (!frame.url.includes('/src/') || frame.url.includes('/node_modules/')) continue;
      const name = label(frame);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + us);
    }
  }
  const busy = total - idle;
  const rank = (map: Map<string, number>, n: number) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => ({ name, ms: us / 1000, pct: busy > 0 ? (us / busy) * 100 : 0 }));
  return {
    totalMs: total / 1000,
    busyMs: busy / 1000,
    topSelf: rank(self, top),
    areas: rank(areas, top),
    appInclusive: rank(inclusive, top),
  };
}

export function formatProfileSummary(
  title: string,
  summary: ProfileSummary,
  requests?: number,
): string {
  const lines: string[] = [];
  const perRequest = requests !== undefined && requests > 0;
  const table = (heading: string, rows: ProfileSummary['topSelf']) => {
    lines.push(
      '',
      `| ${heading} | ms |${perRequest ? ' µs/request |' : ''} % of busy |`,
      `|---|---:|${perRequest ? '---:|' : ''}---:|`,
    );
    for (const row of rows) {
      const us = perRequest ? ` ${((row.ms * 1000) / (requests as number)).toFixed(1)} |` : '';
      lines.push(`| \`${row.name}\` | ${row.ms.toFixed(0)} |${us} ${row.pct.toFixed(1)} |`);
    }
  };
  const busyShare = summary.totalMs > 0 ? (summary.busyMs / summary.totalMs) * 100 : 0;
  lines.push(
    `#### ${title}`,
    '',
    `Profiled ${(summary.totalMs / 1000).toFixed(1)} s of the measurement window; the main thread was busy ` +
      `${(summary.busyMs / 1000).toFixed(1)} s (${busyShare.toFixed(0)}%)` +
      (perRequest
        ? `, ${((summary.busyMs * 1000) / (requests as number)).toFixed(0)} µs per request over ${requests} requests.`
        : '.'),
  );
  table('self time by package / area', summary.areas);
  table('self time by function (top)', summary.topSelf);
  table(
    'inclusive time of app functions in src/ (synchronous stacks only)',
    summary.appInclusive.slice(0, 12),
  );
  return lines.join('\n');
}

// Standalone use: summarize a profile file.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: tsx bench/profile.ts <file.cpuprofile>');
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  console.log(formatProfileSummary(file, summarizeProfile(profile, 25)));
}
