// The image's HEALTHCHECK: the process's /readyz, on WORKER_METRICS_PORT for a `tourops worker`
// that serves its probes there, else on PORT. Exit 0 when ready, 1 otherwise (within 2 s).
const port = process.env.WORKER_METRICS_PORT || process.env.PORT || '3000';
try {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) });
  process.exit(response.ok ? 0 : 1);
} catch {
  process.exit(1);
}
