import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Every file under `dir`, recursively, with its bytes as text (latin1, so a SQLite page or any
 * binary keeps every byte): what the secrets tests search for fragments no escaping changes.
 */
export function filesUnder(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) for (const [file, text] of filesUnder(path)) out.set(file, text);
    else out.set(path, readFileSync(path).toString('latin1'));
  }
  return out;
}
