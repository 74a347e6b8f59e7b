import { readdirSync, readFileSync } from 'node:fs';

/** Whether a process of this id exists (a zombie counts: it has not been reaped). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Processes whose command line holds `marker` (read from /proc, as `ps` would). */
export function processesWith(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * Live tasks (processes and their threads) whose real user is `uid`, counted from /proc. Zombies
 * are left out: they run nothing, and an orphaned bubblewrap waits as one until the machine's init
 * reaps it.
 */
export function tasksOf(uid: number): number {
  let tasks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      const realUid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
      if (realUid === String(uid) && !/^State:\s+Z/m.test(status)) tasks += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 1);
    } catch {
      // Gone since the listing.
    }
  }
  return tasks;
}
