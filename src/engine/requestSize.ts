import type { Message, ToolSpec } from './types.js';

/**
 * The size in bytes (UTF-8 of the JSON a request carries) of one session's next model request,
 * kept up to date as its history grows: what a budget estimates a request's tokens from before it
 * leaves (see `BudgetMeter.admit`).
 *
 * A session's history is append-only except that an append may merge into its last message, so
 * every message but the last is measured once, and the last each time. Made on first use, by a
 * session that spends within a budget: one that does not never pays for it.
 *
 * @example
 * const sizer = new RequestSizer('You are…', tools);
 * sizer.bytes(messages); // the request as it would leave now
 * sizer.bytes(messages, 2_000); // with 2,000 more bytes to come (results not yet delivered)
 */
export class RequestSizer {
  private readonly fixedBytes: number;
  /** Messages measured for good (all but the last seen), and their bytes. */
  private measured = 0;
  private measuredBytes = 0;
  /** The last message as last measured (a merge appends blocks to it: its block count tells). */
  private last: { message: Message; blocks: number; bytes: number } | undefined;

  constructor(system: string, tools: readonly ToolSpec[]) {
    this.fixedBytes = byteLength(system) + byteLength(JSON.stringify(tools));
  }

  /** The request's bytes with `messages` as its history, and `extra` bytes still to join it. */
  bytes(messages: readonly Message[], extra = 0): number {
    const settled = Math.max(0, messages.length - 1);
    // A history that no longer reaches past what was measured (one replaced by a shorter one; a
    // session's own only grows) is measured afresh: its last message may be one measured as settled.
    if (settled < this.measured) {
      this.measured = 0;
      this.measuredBytes = 0;
    }
    for (; this.measured < settled; this.measured++) this.measuredBytes += messageBytes(messages[this.measured]);
    return this.fixedBytes + this.measuredBytes + this.lastBytes(messages[settled]) + extra;
  }

  private lastBytes(message: Message | undefined): number {
    if (!message) return 0;
    const last = this.last;
    if (last?.message === message && last.blocks === message.content.length) return last.bytes;
    const bytes = messageBytes(message);
    this.last = { message, blocks: message.content.length, bytes };
    return bytes;
  }
}

function messageBytes(message: Message | undefined): number {
  return message === undefined ? 0 : byteLength(JSON.stringify(message));
}

/** UTF-8 bytes of `text`, without encoding it (the common all-ASCII case is its length). */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
