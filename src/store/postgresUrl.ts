import { redactUrl } from '../engine/urlSecrets.js';

/**
 * What the CLI needs to know of a Postgres URL before it loads pg (which costs a command that
 * never uses it a second on a loaded machine): whether it is one, and how to show it.
 */

/**
 * The URL as it may be shown: its password, secret parameters (`?password=`, `sslpassword`,
 * `sslkey`, …) and fragment masked, as every URL exarch shows is (`redactUrl`).
 */
export function describeUrl(url: string): string {
  return redactUrl(url);
}

/** Whether `--db`/`--store` names a Postgres server rather than a SQLite file. */
export function isPostgresUrl(target: string): boolean {
  return /^postgres(?:ql)?:\/\//i.test(target);
}
