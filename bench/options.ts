/** Command-line errors of the bench scripts: the message, the usage, exit code 2. */
export function usage(command: string, text: string) {
  const usageError = (message: string): never => {
    process.stderr.write(`${command}: ${message}\n\n${text}`);
    process.exit(2);
  };
  /** The option's value as an integer in [min, max], else a usage error. */
  const integer = (name: string, value: string, min: number, max: number): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      usageError(`--${name} must be an integer between ${min} and ${max}`);
    }
    return n;
  };
  return { usageError, integer };
}
