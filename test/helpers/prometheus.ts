import { spawnSync } from 'node:child_process';

/**
 * Parses a Prometheus text exposition with the reference parser, the official Python client's
 * (Debian's python3-prometheus-client; `.ci/run` installs it): what a real scraper would read.
 */
const SCRIPT = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([
  {"name": f.name, "type": f.type,
   "samples": [{"name": s.name, "labels": s.labels,
                "value": s.value if s.value == s.value else None} for s in f.samples]}
  for f in text_string_to_metric_families(sys.stdin.read())
]))
`;

export interface MetricFamily {
  name: string;
  type: string;
  /** null for NaN, which the exposition allows (a gauge not sampled yet) and JSON does not. */
  samples: Array<{ name: string; labels: Record<string, string>; value: number | null }>;
}

const PYTHON = process.env.PROMETHEUS_PYTHON ?? '/usr/bin/python3';

export function parseExposition(text: string): MetricFamily[] {
  const result = spawnSync(PYTHON, ['-c', SCRIPT], { input: text, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`the parser refused the exposition: ${result.stderr}`);
  return JSON.parse(result.stdout);
}
