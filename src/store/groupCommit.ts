import type { JournalRow, RunStore } from './runStore.js';
import { concernsOneRun } from './storeError.js';

/**
 * One journal's part of a group write: the rows it has buffered (taken when the group is written)
 * and what to tell it when they are.
 */
export interface GroupMember {
  /** The rows buffered since the last take, in seq order; the member's buffer is empty after. */
  take(): readonly JournalRow[];
  /** The rows last taken are in the store. */
  written(): void;
  /** The rows last taken could not be written; nothing more of this member will be. */
  failed(error: Error): void;
}

/**
 * Group commit: the journals of every durable run on one store in this process write together,
 * one `append` for everything they buffered in one turn of the event loop — one SQLite commit,
 * one Postgres round trip, however many sessions and runs took a step in that turn. A commit is
 * most of a durable step's cost, and a worker's runs each committing alone made N round trips
 * where one would do.
 *
 * The guarantee is each journal's own (`RunJournal.barrier`): a member's rows are written before
 * its barrier settles, in seq order. Writes go one at a time: while one is under way (a store
 * that answers with a promise), what the members buffer meanwhile waits and goes in the next
 * write, whole — the classic group commit, where the slower the store, the larger the group.
 *
 * @example
 * const group = groupCommitOf(store); // the same object for every journal of `store`
 */
export class GroupCommit {
  /** Members with rows buffered, in the order they first buffered them. */
  private readonly dirty = new Set<GroupMember>();
  private timer: NodeJS.Immediate | undefined;
  private soon = false;
  /** The write under way, for a store that answers with a promise. */
  private inFlight: Promise<void> | undefined;
  /** Records buffered since the last write began. */
  private records = 0;
  /** Sessions open across every member: when one is left, there is no one to share a write with. */
  openSessions = 0;

  constructor(private readonly store: Pick<RunStore, 'append'>) {}

  /** `member` has buffered rows: written at the end of this turn of the event loop, or sooner. */
  add(member: GroupMember): void {
    this.dirty.add(member);
    if (!this.timer && !this.soon && !this.inFlight) this.timer = setImmediate(this.flushTurn);
  }

  /** A member buffered one more record: a group this large is written now. */
  counted(): void {
    if (++this.records >= MAX_GROUP_RECORDS) this.flush();
  }

  /** Writes in a microtask rather than at the end of the turn (a lone session waits on it). */
  flushSoon(): void {
    if (this.soon || this.inFlight) return;
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    this.soon = true;
    queueMicrotask(this.flushTurn);
  }

  private readonly flushTurn = (): void => {
    this.flush();
  };

  /**
   * Writes what every member has buffered now: for a synchronous store, written when this
   * returns; with a write under way, right after it.
   */
  flush(): void {
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    this.soon = false;
    if (this.inFlight || this.dirty.size === 0) return;
    this.records = 0;
    const parts: (readonly [GroupMember, readonly JournalRow[]])[] = [];
    for (const member of this.dirty) {
      const rows = member.take();
      if (rows.length > 0) parts.push([member, rows]);
    }
    this.dirty.clear();
    if (parts.length === 0) return;
    const rows = parts.length === 1 ? (parts[0] as readonly [GroupMember, readonly JournalRow[]])[1] : parts.flatMap(([, own]) => own);
    let written: Promise<void> | void;
    try {
      written = this.store.append(rows);
    } catch (error) {
      this.wait(this.settle(parts, error));
      return;
    }
    if (!written) {
      for (const [member] of parts) member.written();
      return;
    }
    this.wait(
      written.then(
        () => {
          for (const [member] of parts) member.written();
        },
        (error: unknown) => this.settle(parts, error),
      ),
    );
  }

  /** Holds further writes until `write` settles; then writes what was buffered meanwhile, in one write. */
  private wait(write: Promise<void> | undefined): void {
    if (!write) return;
    const current = write.finally(() => {
      this.inFlight = undefined;
      if (this.dirty.size > 0) this.flush();
    });
    this.inFlight = current;
  }

  /** After a failed group write: each member alone when the failure may be one run's, all failed otherwise. */
  private settle(parts: readonly (readonly [GroupMember, readonly JournalRow[]])[], error: unknown): Promise<void> | undefined {
    const failure = asError(error);
    if (parts.length > 1 && concernsOneRun(failure)) return this.alone(parts, 0);
    for (const [member] of parts) member.failed(failure);
    return undefined;
  }

  /** Writes each part on its own, in order, from `from`: synchronously for a synchronous store. */
  private alone(parts: readonly (readonly [GroupMember, readonly JournalRow[]])[], from: number): Promise<void> | undefined {
    for (let i = from; i < parts.length; i++) {
      const [member, rows] = parts[i] as readonly [GroupMember, readonly JournalRow[]];
      let written: Promise<void> | void;
      try {
        written = this.store.append(rows);
      } catch (error) {
        member.failed(asError(error));
        continue;
      }
      if (!written) {
        member.written();
        continue;
      }
      return written
        .then(
          () => member.written(),
          (error: unknown) => member.failed(asError(error)),
        )
        .then(() => this.alone(parts, i + 1));
    }
    return undefined;
  }
}

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * Records a group holds at most: past this, it is written at once, mid-turn. A wave of 10,000
 * sub-agents answered together appends 18,000 records in one turn; buffered until its end, all of
 * them (and every session's step, waiting on one barrier) lived through the turn's scavenges into
 * the old generation, and a sub-agent cost 1.4× more at 10,000 than at 200 (measured). Written in
 * slices, a wave costs the same per sub-agent at any width; each slice is one more commit, which
 * in WAL mode with synchronous=NORMAL is cheap.
 */
const MAX_GROUP_RECORDS = 128;

const groups = new WeakMap<object, GroupCommit>();

/** The group of `store`: every journal writing to the same store object in this process shares it. */
export function groupCommitOf(store: Pick<RunStore, 'append'>): GroupCommit {
  let group = groups.get(store);
  if (!group) {
    group = new GroupCommit(store);
    groups.set(store, group);
  }
  return group;
}
