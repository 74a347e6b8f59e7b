import type { ServerResponse } from 'node:http';

/**
 * How much of the run may arrive while a client takes nothing before the server drops it: 4 MiB.
 * What the server holds for a client does not depend on it (every body is written with
 * backpressure: at most a chunk and the socket's high-water mark); it decides how long a client
 * that stopped reading keeps its connection, and the page it was being sent. A browser that is
 * alive takes what comes within moments (its network process reads the socket whatever the page
 * is busy with), and even one that is dropped loses nothing: its EventSource reconnects with the
 * last id it got. A few MiB is far more than a live run sends in a moment (records are a few
 * hundred bytes to a few KiB) and about what the kernel already buffers per loopback connection.
 */
export const STALL_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * The live viewer's clients that may stop reading, watched against the run's progress (bytes of
 * records so far): one whose socket is full (`writableNeedDrain`) and has been since the run grew
 * by more than `STALL_LIMIT_BYTES` is dropped, its connection destroyed (ending it gracefully would
 * wait on the very bytes it does not read).
 */
export class StallWatch {
  /** Each client, and the run's progress when it was last seen taking what it was sent. */
  private readonly seen = new Map<ServerResponse, number>();

  constructor(private readonly progress: () => number) {}

  /** Watches `response` until it closes. */
  watch(response: ServerResponse): void {
    this.seen.set(response, this.progress());
    response.on('drain', () => {
      if (this.seen.has(response)) this.seen.set(response, this.progress());
    });
    response.on('close', () => this.seen.delete(response));
  }

  /** The run grew: drops the clients that took nothing meanwhile, beyond the limit. */
  check(): void {
    const now = this.progress();
    for (const [response, seen] of this.seen) {
      if (!response.writableNeedDrain) this.seen.set(response, now);
      else if (now - seen > STALL_LIMIT_BYTES) {
        this.seen.delete(response);
        response.destroy();
      }
    }
  }
}
