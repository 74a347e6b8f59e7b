import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`, one component at a time. Node 20's `mkdirSync(dir, { recursive: true })` never
 * returns for a path under `/proc` (it retries the ENOENT that /proc answers forever: measured,
 * a spinning CPU), and a user's `--log-dir` or `--trace` path is enough to reach it. Each missing
 * component is made on its own; the first failure is thrown as it is (ENOTDIR, EACCES, ENOENT).
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  let current = resolve(dir);
  for (;;) {
    try {
      if (!statSync(current).isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR' });
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') throw error;
    }
    missing.push(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
