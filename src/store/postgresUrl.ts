/**
 * What the CLI needs to know of a Postgres URL before it loads pg (which costs a command that
 * never uses it a second on a loaded machine): whether it is one, and how to show it.
 */

/** The URL as it may be shown: without its password. */
export function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Whether `--db`/`--store` names a Postgres server rather than a SQLite file. */
export function isPostgresUrl(target: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(target);
}
