import { register } from 'node:module';

/** The variables that turn tracing on (the OpenTelemetry SDK's own). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/**
 * Starts the OpenTelemetry SDK when an OTLP endpoint is configured, before the application's
 * modules load (the instrumentations patch `http` and `pg` as they load); otherwise loads nothing
 * of the SDK. Entry points await it first (bin/tourops.js, src/main.ts).
 */
export async function startTracingIfConfigured(): Promise<void> {
  if (!tracingConfigured()) return;
  // ES modules are patched through import-in-the-middle's loader hook.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const { startTracing } = await import('./tracing-sdk.ts');
  startTracing();
}
