import { homedir } from 'node:os';
import path from 'node:path';

/**
 * Where exarch keeps what belongs to the person rather than to a workspace (the key that signs the
 * CLI's run records): `$EXARCH_STATE_DIR`, else `$XDG_STATE_HOME/exarch`, else
 * `~/.local/state/exarch`. Outside every working directory, and hidden from sandboxed commands:
 * nothing an agent runs may read or change it.
 */
export function exarchStateDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const explicit = env['EXARCH_STATE_DIR'];
  if (explicit !== undefined && explicit !== '') return path.resolve(explicit);
  // The XDG spec: a relative value is invalid and is to be ignored.
  const xdg = env['XDG_STATE_HOME'];
  if (xdg !== undefined && path.isAbsolute(xdg)) return path.join(xdg, 'exarch');
  const home = env['HOME'] !== undefined && path.isAbsolute(env['HOME']) ? env['HOME'] : homedir();
  return path.join(home, '.local', 'state', 'exarch');
}
