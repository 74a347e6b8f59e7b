import { StoreError } from '../store/storeError.js';

/**
 * The files a run writes as it goes (its session logs, `--trace`, `--record`) and what happens
 * when one cannot be written (a full disk, a file-size limit, a read-only directory, a FIFO where
 * a log goes): the first fault stops the run as Ctrl-C does (the tree cancelled, a durable run
 * left interrupted and resumable once there is room), and the command ends with one line naming
 * the file and the cause (exit 5). The faults that follow (the same full disk, met by every log
 * in turn) are not said again. Nothing is lost on the way: each file holds whole lines only, and
 * the store (when it is the one that is full) keeps every commit up to the failed one.
 */
export class WriteFaults {
  private fault: Error | undefined;
  private stop: (() => void) | undefined;

  /** A file could not be written. */
  readonly report = (fault: Error): void => {
    if (this.fault) return;
    this.fault = fault;
    this.stop?.();
  };

  /** `stop` is called at the first fault; at once if one came already (while the run was set up). */
  onFault(stop: () => void): void {
    this.stop = stop;
    if (this.fault) stop();
  }

  /**
   * The fault a run ends with: the store's when it could not be written (`storeError`, which
   * stopped the run itself) for want of room or permission; undefined when the store failed
   * otherwise (a conflict: said as such). Without a store error, the first file fault, if any.
   */
  first(storeError: Error | undefined): Error | undefined {
    if (storeError !== undefined) return storeError instanceof StoreError && storeError.kind === 'unwritable' ? storeError : undefined;
    return this.fault;
  }
}
