/**
 * How long a wait may last before the test calls it hung: a backstop, not a promise. A wait is
 * for an event, and how soon the event comes is the machine's load; so no wait is bounded tighter
 * than this (a timing promise is checked from the product's own record instead).
 */
export const HUNG_AFTER_MS = 60_000;

/**
 * Polls `probe` every `everyMs` until it returns something other than undefined; fails after
 * HUNG_AFTER_MS, naming `what`. A probe that costs (an API call validated against the document)
 * polls less often.
 */
export async function until<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  what = 'condition',
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + HUNG_AFTER_MS;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${HUNG_AFTER_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Polls `condition` until it holds; fails after HUNG_AFTER_MS, naming `what`. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  what = 'condition',
): Promise<void> {
  await until(async () => ((await condition()) ? true : undefined), what);
}
