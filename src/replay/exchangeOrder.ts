/**
 * Hands a replay's answers out in the order the recording got them. Sub-agents ask concurrently,
 * and what a parent's next request holds depends on which children had delivered by then: so an
 * answer is given only once everything that came before it when recorded (other requests begun,
 * other answers given) has happened again, and the effects of the answer before it (tool calls,
 * replies, deliveries) have had their turn of the event loop.
 *
 * A replay that has gone another way can wait for something that never comes again (a request no
 * longer made); when nothing has moved for a while, the earliest waiting answer goes anyway, and
 * the requests that follow say where the run differs. A while: `idleMs`, plus twice what the
 * recorded run took to get from the last position seen to the one waited for (at most a minute of
 * it), so a slow step of the recording (a tool that ran for a minute) is waited for, not skipped.
 */
export class ExchangeOrder {
  /** Which positions of the recorded sequence (beginnings and ends) have happened again. */
  private readonly seen: Uint8Array;
  /** The first position not seen yet. */
  private frontier = 0;
  private readonly waiting = new Map<number, () => void>();
  private releasing = false;
  private idle: NodeJS.Timeout | undefined;

  /**
   * @param times when each position happened in the recorded run, in milliseconds (NaN or missing
   *   where the recording does not say).
   */
  constructor(
    positions: number,
    private readonly times: ArrayLike<number> = [],
    private readonly idleMs = 2_000,
  ) {
    this.seen = new Uint8Array(positions);
  }

  /** Something of the recorded sequence happened again: a request began, or an answer was given. */
  happened(position: number): void {
    if (position < 0 || position >= this.seen.length || this.seen[position] === 1) return;
    this.seen[position] = 1;
    while (this.frontier < this.seen.length && this.seen[this.frontier] === 1) this.frontier++;
    this.schedule();
  }

  /** Resolves when the answer at `position` is due; rejects if `signal` aborts first. */
  turn(position: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = (): void => {
        this.waiting.delete(position);
        reject(signal.reason);
        this.schedule();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.set(position, () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
      this.schedule();
    });
  }

  /** Releases the due answer after the event loop has run what the last one set going. */
  private schedule(): void {
    clearTimeout(this.idle);
    this.idle = undefined;
    if (this.waiting.size === 0 || this.releasing) return;
    this.releasing = true;
    // Two turns: the answer before this one resolved a promise; its consequences run in microtasks
    // and the I/O callbacks of the turn after.
    setImmediate(() =>
      setImmediate(() => {
        this.releasing = false;
        const due = this.waiting.get(this.frontier);
        if (due) {
          this.waiting.delete(this.frontier);
          due();
        }
        // Whatever happens next clears this; only a replay that stopped moving reaches it.
        if (this.waiting.size > 0) this.idle = setTimeout(() => this.skipAhead(), this.idleMs + 2 * this.recordedGap());
      }),
    );
  }

  /** How long the recorded run took from the last position seen to the first not seen yet (0 if unknown). */
  private recordedGap(): number {
    const gap = (this.times[this.frontier] ?? Number.NaN) - (this.times[this.frontier - 1] ?? Number.NaN);
    // At most a minute: a recording that sat ten minutes on a person's approval should not make a
    // replay that went another way wait twenty before it says so.
    return Number.isFinite(gap) && gap > 0 ? Math.min(gap, MAX_GAP_MS) : 0;
  }

  /** Nothing moved: what the earliest waiting answer waits for will not happen again. */
  private skipAhead(): void {
    this.idle = undefined;
    const earliest = Math.min(...this.waiting.keys());
    if (!Number.isFinite(earliest)) return;
    for (let position = this.frontier; position < earliest; position++) this.seen[position] = 1;
    this.frontier = earliest;
    this.schedule();
  }
}

/** The longest recorded stretch a replay waits out (twice, plus `idleMs`). */
const MAX_GAP_MS = 60_000;
