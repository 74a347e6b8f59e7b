/** A token count as the CLI shows it: `950`, `1.2k`, `34k`, `1.5M`. Apart from progress.ts, so `exarch runs` need not load the live tree. */
export function formatCount(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}
