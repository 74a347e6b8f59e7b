import { isSecretVariable } from '../../engine/redact.js';
import { isPostgresVariable } from './postgresCredentials.js';

/**
 * The environment a `run_shell` command starts with: the user's, without anything that looks like
 * a credential. A command's output goes to the model and to the logs, so a secret it can read is a
 * secret that leaves the machine.
 */

/**
 * The user's environment minus every variable that holds a credential (deny-list, the one the
 * redactors use: `ANTHROPIC_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`, `PGPASSWORD`, the OTLP
 * headers, a URL with a password or token in it such as `EXARCH_DB_URL`).
 */
export function shellEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && !isSecretVariable(name, value)) kept[name] = value;
  }
  return kept;
}

/**
 * Inside the sandbox: the same, without any of libpq's variables (`PG*`) or `EXARCH_DB_URL` (the
 * run store's server, its user and where its password is: postgresCredentials.ts), with `TMPDIR`
 * pointing at the sandbox's private `/tmp` (the user's own temporary directory is read-only or
 * hidden there), and, for a command run as another `user`, that user's HOME, USER and LOGNAME
 * instead of exarch's.
 */
export function sandboxEnvironment(env: NodeJS.ProcessEnv, user?: { readonly name?: string; readonly home: string }): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = { ...shellEnvironment(env), TMPDIR: '/tmp' };
  for (const name of Object.keys(kept)) if (isPostgresVariable(name)) delete kept[name];
  if (user === undefined) return kept;
  delete kept['USER'];
  delete kept['LOGNAME'];
  return { ...kept, HOME: user.home, ...(user.name === undefined ? {} : { USER: user.name, LOGNAME: user.name }) };
}
