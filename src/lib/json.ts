/** Parses JSON text stored by us; a corrupt column is a bug, so it throws. */
export function parseStoredJson<T>(text: string): T {
  return JSON.parse(text) as T;
}
