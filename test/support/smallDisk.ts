import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup } from './cliHarness.js';

/**
 * Small disks for the tests of what exarch does when a disk fills: a tmpfs of a given size,
 * mounted for one test. Mounting needs root: without it such a file skips with one line on
 * stderr locally; under CI (which runs as root) it fails instead.
 */
export function requireMounts(testFile: string): boolean {
  const ci = process.env['CI'] ?? '';
  const onCi = ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
  const root = process.getuid?.() === 0;
  if (!root) {
    if (onCi) throw new Error(`${testFile} needs root under CI (it mounts a small tmpfs to fill it)`);
    process.stderr.write(`skipping the full-disk tests of ${testFile}: they mount a tmpfs, which needs root\n`);
  }
  return root;
}

/**
 * A tmpfs of `size` (as mount's `size=` option: `1m`) at `at` (an empty directory) or at a new
 * directory, unmounted after the test.
 */
export function smallDisk(size: string, at?: string): string {
  const dir = at ?? mkdtempSync(join(tmpdir(), 'exarch-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir]);
  onCleanup(() => {
    // Lazily: a process the test killed may still hold a file open there for a moment.
    execFileSync('umount', ['-l', dir]);
    if (at === undefined) rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Gives the disk at `dir` a new size (mount's `remount`), keeping what it holds. */
export function resizeDisk(dir: string, size: string): void {
  execFileSync('mount', ['-o', `remount,size=${size}`, dir]);
}

/** Makes the disk at `dir` read-only (`ro`) or writable again (`rw`), keeping what it holds. */
export function remountDisk(dir: string, mode: 'ro' | 'rw'): void {
  execFileSync('mount', ['-o', `remount,${mode}`, dir]);
}

/**
 * Fills the disk at `dir` with a file until about `leave` bytes are free; returns a function that
 * frees that room again (removes the file).
 */
export function fillDisk(dir: string, leave: number): () => void {
  const { bavail, bsize } = statfsSync(dir);
  const filler = join(dir, 'filler');
  writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - leave)));
  return () => unlinkSync(filler);
}
