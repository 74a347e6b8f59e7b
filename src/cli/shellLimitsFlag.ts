import { LIMIT_MINIMUMS, LIMIT_NAMES, resolveShellLimits, type ShellLimit, type ShellLimits } from '../tools/workspace/shellLimits.js';
import { UsageError } from './usageError.js';

/** Binary multiples, as `ulimit` and most tools read K, M, G. */
const SIZE_UNITS: Readonly<Record<string, number>> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };
const TIME_UNITS: Readonly<Record<string, number>> = { '': 1, S: 1, M: 60, H: 3600 };

const FORMS: Readonly<Record<keyof ShellLimits, { readonly units: Readonly<Record<string, number>>; readonly example: string }>> = {
  processes: { units: { '': 1 }, example: 'a count like 512' },
  memory: { units: SIZE_UNITS, example: 'a size like 4G (bytes, or K, M, G, T)' },
  fileSize: { units: SIZE_UNITS, example: 'a size like 1G (bytes, or K, M, G, T)' },
  cpu: { units: TIME_UNITS, example: 'seconds like 300 (or 5m, 1h)' },
  openFiles: { units: { '': 1 }, example: 'a count like 4096' },
};

const BY_NAME = new Map(Object.entries(LIMIT_NAMES).map(([key, name]) => [name, key as keyof ShellLimits]));

/**
 * `--shell-limits processes=256,memory=4G,file-size=1G,cpu=300,open-files=4096`: the limits named,
 * the others at their defaults. Any of them may be `unlimited`. A bad part is one UsageError line.
 */
export function parseShellLimits(raw: string): ShellLimits {
  const given: { -readonly [K in keyof ShellLimits]?: ShellLimit } = {};
  const parts = raw.split(',').map((part) => part.trim());
  if (parts.every((part) => part === '')) throw new UsageError(`--shell-limits needs NAME=VALUE pairs (${[...BY_NAME.keys()].join(', ')}), got '${raw}'`);
  for (const part of parts) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = (eq < 0 ? part : part.slice(0, eq)).trim();
    const key = BY_NAME.get(name);
    if (key === undefined) throw new UsageError(`--shell-limits: no limit named '${name}' (the limits: ${[...BY_NAME.keys()].join(', ')})`);
    if (eq < 0) throw new UsageError(`--shell-limits: ${name} needs a value: ${name}=VALUE`);
    if (given[key] !== undefined) throw new UsageError(`--shell-limits: ${name} is given twice`);
    given[key] = limitValue(key, name, part.slice(eq + 1).trim());
  }
  return resolveShellLimits(given);
}

function limitValue(key: keyof ShellLimits, name: string, text: string): ShellLimit {
  if (text === 'unlimited') return 'unlimited';
  const { units, example } = FORMS[key];
  const match = /^(\d+)([A-Za-z]?)$/.exec(text);
  const unit = units[(match?.[2] ?? '').toUpperCase()];
  if (match === null || unit === undefined) throw new UsageError(`--shell-limits: ${name} must be ${example}, or unlimited; got '${text}'`);
  const value = Number(match[1]) * unit;
  if (!Number.isSafeInteger(value)) throw new UsageError(`--shell-limits: ${name}=${text} is too large; use unlimited`);
  if (value < LIMIT_MINIMUMS[key]) throw new UsageError(`--shell-limits: ${name} must be at least ${minimumText(key)}, got '${text}'`);
  return value;
}

function minimumText(key: keyof ShellLimits): string {
  const minimum = LIMIT_MINIMUMS[key];
  return FORMS[key].units === SIZE_UNITS && minimum >= 1024 ** 2 ? `${minimum / 1024 ** 2}M` : String(minimum);
}
