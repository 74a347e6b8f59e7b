import { createHmac, timingSafeEqual } from 'node:crypto';
import { depthExceeds } from '../engine/nesting.js';
import type { ClaimResult, JournalRow, NewRun, RunListing, RunOwner, RunRow, RunStatus, RunStore } from '../store/runStore.js';
import type { SqliteRunStore } from '../store/sqliteStore.js';

/**
 * A resume takes its powers (shell mode, network, write access, MCP commands, approvals, declared
 * agents, log directory…) from the run's stored record, and the store is a file a process of the
 * user's can write. So `exarch run` signs the record as it is stored, with the person's key
 * (runKey.ts, out of every workspace and hidden from the sandbox): HMAC-SHA256 over the run's id,
 * its working directory and the record in a canonical form. `exarch resume` checks the signature
 * before it builds anything, and refuses a record that was changed, or was never signed.
 *
 * Runs kept in PostgreSQL (`--db`) are not signed: workers on other machines share no key; the
 * database's own access control keeps their records.
 */

/** The field of the stored options that holds the signature (it is not part of what it signs). */
const SEAL_FIELD = 'seal';
const SEAL_PREFIX = 'hmac-sha256:';
/** What the signature is of, and in which version of this form. */
const CONTEXT = 'exarch run record v1';
/** Deeper than any record the store keeps (it bounds what it writes at 128 levels); a deeper one was not written by exarch. */
const MAX_DEPTH = 256;

/** The signature of a record, as stored (`SqliteRunStore.storedOptions`, without a seal). */
function sealOf(key: Buffer, id: string, cwd: string, options: Readonly<Record<string, unknown>>): string {
  return (
    SEAL_PREFIX +
    createHmac('sha256', key)
      .update(canonicalJson([CONTEXT, id, cwd, options]))
      .digest('hex')
  );
}

/**
 * JSON with every object's keys in sorted order, so that a record parsed and written again has the
 * same text. Hand-written rather than `replay/fingerprint.ts`'s, which builds objects again (a
 * `__proto__` key would be lost from one) and recurses unguarded; callers check the depth first.
 */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Readonly<Record<string, unknown>>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** How a stored record stands against the person's key. */
export type SealCheck = 'signed' | 'unsigned' | 'changed' | 'no-key';

/** Checks a stored run's record; `key` undefined: the person has no key (any more). */
export function checkSeal(key: Buffer | undefined, row: Pick<RunRow, 'id' | 'cwd' | 'options'>): SealCheck {
  const { [SEAL_FIELD]: seal, ...options } = row.options;
  if (seal === undefined) return 'unsigned';
  if (typeof seal !== 'string' || depthExceeds(options, MAX_DEPTH)) return 'changed';
  if (key === undefined) return 'no-key';
  const expected = Buffer.from(sealOf(key, row.id, row.cwd, options));
  const given = Buffer.from(seal);
  return given.length === expected.length && timingSafeEqual(given, expected) ? 'signed' : 'changed';
}

/** The one line `exarch resume` says for a record that does not verify. */
export function sealRefusal(runId: string, check: Exclude<SealCheck, 'signed'>, keyFile: string): string {
  const why =
    check === 'changed'
      ? 'its options were changed outside exarch (they no longer match the signature they were recorded with)'
      : check === 'unsigned'
        ? 'its options were recorded without a signature (by an older exarch, or written outside exarch), so a change to them could not be told'
        : `the key that signed its options (${keyFile}) is gone, so they cannot be checked`;
  return `run ${runId} was not resumed: ${why}; nothing was started, and the run is as it was`;
}

/**
 * `store` for `startRun`: each run it creates is stored with the signature of its record, as the
 * store keeps it (bounded, redacted). Everything else goes straight through.
 */
export function sealingStore(store: SqliteRunStore, key: Buffer): RunStore {
  return new SealingStore(store, key);
}

class SealingStore implements RunStore {
  constructor(
    private readonly store: SqliteRunStore,
    private readonly key: Buffer,
  ) {}

  createRun(run: NewRun): void {
    const { [SEAL_FIELD]: _, ...options } = run.options;
    // Signed as it will be read back; the field added after the rest, which the store bounds and redacts as it would have.
    const stored = this.store.storedOptions(options);
    this.store.createRun({ ...run, options: { ...options, [SEAL_FIELD]: sealOf(this.key, run.id, run.cwd, stored) } });
  }

  getRun(id: string): RunRow | undefined {
    return this.store.getRun(id);
  }

  listRuns(): RunListing[] {
    return this.store.listRuns();
  }

  append(rows: readonly JournalRow[]): void {
    this.store.append(rows);
  }

  journal(runId: string): JournalRow[] {
    return this.store.journal(runId);
  }

  claim(runId: string, owner: RunOwner, leaseMs: number): ClaimResult {
    return this.store.claim(runId, owner, leaseMs);
  }

  renew(runId: string, owner: RunOwner, leaseMs: number): boolean {
    return this.store.renew(runId, owner, leaseMs);
  }

  release(runId: string, owner: RunOwner, status: RunStatus): void {
    this.store.release(runId, owner, status);
  }

  close(): void {
    this.store.close();
  }
}
