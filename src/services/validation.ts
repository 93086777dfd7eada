import { type FieldErrors, validationFailed } from '../lib/problems.ts';

/** Collects domain-rule failures (beyond the request schema) into one 422 with every field. */
export class FieldErrorCollector {
  private readonly errors: FieldErrors = Object.create(null);

  add(field: string, message: string): void {
    if (!this.errors[field]) this.errors[field] = [];
    this.errors[field].push(message);
  }

  throwIfAny(): void {
    if (Object.keys(this.errors).length > 0) throw validationFailed(this.errors);
  }
}

/** `YYYY-MM-DD` that names a real calendar day, as midnight UTC; null when it is not one. */
export function calendarDate(value: string): string | null {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return null;
  const date = new Date(`${value}T00:00:00.000Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value)
    ? date.toISOString()
    : null;
}
