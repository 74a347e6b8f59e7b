import { existsSync } from 'node:fs';

/**
 * Where bubblewrap is installed, for the tests that run commands in its sandbox. Missing, such a
 * file skips with one line on stderr locally; under CI (where it is installed) a missing one fails.
 */
export function requireBubblewrap(testFile: string): string | undefined {
  const bwrap = ['/usr/bin/bwrap', '/usr/local/bin/bwrap'].find((p) => existsSync(p));
  const ci = process.env['CI'] ?? '';
  const onCi = ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
  if (bwrap === undefined) {
    if (onCi) throw new Error(`${testFile} needs bubblewrap under CI (apt-get install bubblewrap)`);
    process.stderr.write(`skipping ${testFile}: bubblewrap not found (apt-get install bubblewrap)\n`);
  }
  return bwrap;
}
