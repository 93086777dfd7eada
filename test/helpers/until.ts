/**
 * Polls `probe` every `everyMs` until it returns something other than undefined; fails after
 * `timeoutMs`. A probe that costs (an API call validated against the document) polls less often.
 */
export async function until<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 5_000,
  what = 'condition',
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Polls `condition` until it holds; fails after `timeoutMs`. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  await until(async () => ((await condition()) ? true : undefined), timeoutMs, what);
}
