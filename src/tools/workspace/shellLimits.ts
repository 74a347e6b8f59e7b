import { readFileSync } from 'node:fs';
import { constants } from 'node:os';

/**
 * What one sandboxed command may use: Linux resource limits (rlimits), set by util-linux's
 * `prlimit` inside the sandbox just before `/bin/sh`, soft and hard alike, so the command cannot
 * raise them (it holds no capability). bubblewrap itself, and exarch, are not limited.
 *
 * `processes` counts the tasks (processes and threads) whose user is the command's, in the user
 * namespace bubblewrap makes for a command it runs without root (Linux ≥ 5.14 keeps this count per
 * namespace): that is, this command's own processes, bubblewrap's init included, and not the
 * user's others on the machine. The kernel never applies it to root, so it does not hold for
 * commands run as root (`shellUser: 'root'`).
 */
export interface ShellLimits {
  /** Processes and threads at once (RLIMIT_NPROC). */
  readonly processes: ShellLimit;
  /** Bytes of writable memory each process may map (RLIMIT_DATA: what it reserves but never makes writable is free). */
  readonly memory: ShellLimit;
  /** The largest file a process may write, in bytes (RLIMIT_FSIZE): past it, SIGXFSZ or EFBIG. */
  readonly fileSize: ShellLimit;
  /** Seconds of CPU time each process may use (RLIMIT_CPU): SIGXCPU then, SIGKILL a second later. */
  readonly cpu: ShellLimit;
  /** Descriptors each process may hold open (RLIMIT_NOFILE). */
  readonly openFiles: ShellLimit;
}

/** A number (bytes, seconds or a count), or no limit beyond the one exarch itself has. */
export type ShellLimit = number | 'unlimited';

const GiB = 1024 ** 3;

/**
 * Room for a build or a test run (a parallel compiler counts its threads; a Node build may ask for
 * an 8 GB heap), little enough to stop a fork bomb, a memory balloon, a 100 GB file and an endless
 * loop the command's timeout was raised for.
 */
export const DEFAULT_SHELL_LIMITS: ShellLimits = { processes: 1024, memory: 8 * GiB, fileSize: 4 * GiB, cpu: 600, openFiles: 8192 };

/** The limits as the CLI names them, in `--shell-limits processes=…,memory=…`. */
export const LIMIT_NAMES: Readonly<Record<keyof ShellLimits, string>> = {
  processes: 'processes',
  memory: 'memory',
  fileSize: 'file-size',
  cpu: 'cpu',
  openFiles: 'open-files',
};

/** The smallest useful value of each: below these not even `/bin/sh` starts. */
export const LIMIT_MINIMUMS: Readonly<Record<keyof ShellLimits, number>> = {
  processes: 1,
  memory: 16 * 1024 ** 2,
  fileSize: 1,
  cpu: 1,
  openFiles: 16,
};

const KEYS = Object.keys(LIMIT_NAMES) as (keyof ShellLimits)[];

/** Each limit given, checked, the others at their defaults; a bad value is a RangeError naming it. */
export function resolveShellLimits(given: Partial<ShellLimits> = {}): ShellLimits {
  const resolved = { ...DEFAULT_SHELL_LIMITS };
  for (const key of KEYS) {
    const value = given[key];
    if (value === undefined) continue;
    if (value !== 'unlimited' && (!Number.isSafeInteger(value) || value < LIMIT_MINIMUMS[key])) {
      throw new RangeError(`exarch: shellLimits.${key} must be an integer ≥ ${LIMIT_MINIMUMS[key]} or 'unlimited', got ${String(value)}`);
    }
    resolved[key] = value;
  }
  return resolved;
}

/** The rows of /proc/self/limits for each limit, and the prlimit option that sets it. */
const RLIMITS: Readonly<Record<keyof ShellLimits, { readonly row: string; readonly option: string }>> = {
  processes: { row: 'Max processes', option: '--nproc' },
  memory: { row: 'Max data size', option: '--data' },
  fileSize: { row: 'Max file size', option: '--fsize' },
  cpu: { row: 'Max cpu time', option: '--cpu' },
  openFiles: { row: 'Max open files', option: '--nofile' },
};

/** exarch's own hard limits, which the command inherits and cannot exceed (Infinity: none). */
export function hardLimits(text: string = readFileSync('/proc/self/limits', 'utf8')): Readonly<Record<keyof ShellLimits, number>> {
  const hard = (row: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(row));
    const value = line?.slice(row.length).trim().split(/\s+/)[1];
    return value === undefined || value === 'unlimited' || !/^\d+$/.test(value) ? Number.POSITIVE_INFINITY : Number(value);
  };
  return {
    processes: hard(RLIMITS.processes.row),
    memory: hard(RLIMITS.memory.row),
    fileSize: hard(RLIMITS.fileSize.row),
    cpu: hard(RLIMITS.cpu.row),
    openFiles: hard(RLIMITS.openFiles.row),
  };
}

/**
 * The limits a command actually gets: what was asked for, but never above exarch's own hard limit
 * (prlimit, without privileges, could not raise it, and the command would not start).
 */
export function effectiveLimits(limits: ShellLimits, hard: Readonly<Record<keyof ShellLimits, number>>): ShellLimits {
  const capped = { ...limits };
  for (const key of KEYS) {
    const value = limits[key];
    if (value !== 'unlimited' && value > hard[key]) capped[key] = hard[key];
  }
  return capped;
}

/** prlimit's options for `limits` (none for a limit that is not set). */
export function prlimitOptions(limits: ShellLimits, hard: Readonly<Record<keyof ShellLimits, number>>): string[] {
  const options: string[] = [];
  for (const key of KEYS) {
    const value = limits[key];
    if (value === 'unlimited') continue;
    // The CPU limit's hard stop one second after the soft one: SIGXCPU first (which names the
    // limit when the command dies of it), SIGKILL for a process that catches SIGXCPU.
    const option = key === 'cpu' ? `${value}:${Math.min(value + 1, hard.cpu)}` : String(value);
    options.push(`${RLIMITS[key].option}=${option}`);
  }
  return options;
}

/** Whether any limit is set, so that prlimit is needed at all. */
export function anyLimit(limits: ShellLimits): boolean {
  return KEYS.some((key) => limits[key] !== 'unlimited');
}

/** `8 GiB`, `512 MiB`, `1000 bytes`. */
function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['TiB', 1024 ** 4],
    ['GiB', GiB],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}

/** One limit in words, as the model and the person are told it. */
function describeLimit(key: keyof ShellLimits, value: ShellLimit): string {
  if (value === 'unlimited') return `${LIMIT_NAMES[key]}: not limited`;
  switch (key) {
    case 'processes':
      return `processes: ${value} processes and threads at once`;
    case 'memory':
      return `memory: ${formatBytes(value)} per process`;
    case 'fileSize':
      return `file-size: ${formatBytes(value)} per file`;
    case 'cpu':
      return `cpu: ${value} s of CPU time per process`;
    case 'openFiles':
      return `open-files: ${value} per process`;
  }
}

/** Every limit in words, for the tool's description. */
export function describeLimits(limits: ShellLimits): string {
  return KEYS.map((key) => describeLimit(key, limits[key])).join(', ');
}

/** How a command ended, as runShell saw it. */
export interface ShellExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** exarch killed it (its timeout). */
  readonly timedOut: boolean;
}

/** The name of the signal behind a shell's exit code 128 + N, if N is a signal. */
export function signalOfExitCode(code: number): NodeJS.Signals | undefined {
  if (code <= 128 || code > 128 + 64) return undefined;
  const found = Object.entries(constants.signals).find(([, number]) => number === code - 128);
  return found?.[0] as NodeJS.Signals | undefined;
}

/** What a command's output says when a limit refused it (the texts of EAGAIN, ENOMEM, EFBIG, EMFILE and the shells' own). */
const SIGNS: readonly { readonly key: keyof ShellLimits; readonly pattern: RegExp; readonly what: string }[] = [
  { key: 'processes', pattern: /Resource temporarily unavailable|Cannot fork|fork: retry|\bEAGAIN\b/, what: 'a new process or thread was refused' },
  {
    key: 'memory',
    pattern: /Cannot allocate memory|out of memory|MemoryError|bad_alloc|allocation failed|\bENOMEM\b/i,
    what: 'an allocation was refused',
  },
  { key: 'fileSize', pattern: /File size limit exceeded|File too large|\bEFBIG\b/i, what: 'a write past the limit was refused' },
  { key: 'cpu', pattern: /CPU time limit exceeded/, what: 'a process used up its CPU time' },
  { key: 'openFiles', pattern: /Too many open files|\bEMFILE\b/, what: 'a file could not be opened' },
];

/**
 * Lines that name the limit a command ran into, for the model: a process killed by SIGXCPU or
 * SIGXFSZ (directly, or the shell's exit code 128 + N, which is how bubblewrap and the shell pass
 * it on), a SIGKILL exarch did not send, and the error texts a refused fork, allocation, write or
 * open prints. The texts are a guess, said as one.
 */
export function limitNotes(exit: ShellExit, output: string, limits: ShellLimits, asRoot: boolean): string[] {
  const notes: string[] = [];
  const named = new Set<keyof ShellLimits>();
  const signal = exit.signal ?? (exit.code === null ? undefined : signalOfExitCode(exit.code));
  if (signal === 'SIGXCPU' && limits.cpu !== 'unlimited') {
    named.add('cpu');
    notes.push(`sandbox limit reached: cpu — a process used its ${limits.cpu} s of CPU time and was killed by SIGXCPU`);
  } else if (signal === 'SIGXFSZ' && limits.fileSize !== 'unlimited') {
    named.add('fileSize');
    notes.push(
      `sandbox limit reached: file-size — a process wrote past ${formatBytes(limits.fileSize)} in one file and was killed by SIGXFSZ (the file stops there)`,
    );
  } else if (signal === 'SIGKILL' && !exit.timedOut) {
    notes.push(
      `killed by SIGKILL, not by exarch's timeout: the hard stop of the cpu limit (${limits.cpu === 'unlimited' ? 'not set' : `${limits.cpu} s`}, for a process that ignores SIGXCPU) or the kernel's out-of-memory killer`,
    );
  }
  for (const sign of SIGNS) {
    const limit = limits[sign.key];
    if (limit === 'unlimited' || named.has(sign.key) || (sign.key === 'processes' && asRoot)) continue;
    const seen = sign.pattern.exec(output);
    if (seen) notes.push(`sandbox limit probably reached: ${describeLimit(sign.key, limit)} — the output says "${seen[0]}": ${sign.what}`);
  }
  return notes;
}
