import type { RequestSpend } from '../engine/model/streamModel.js';
import { addUsage } from '../engine/usage.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';

/**
 * What one journal record adds to its run's model requests and tokens: a committed response
 * (`usage`) is one request, or more when it was retried, with what its retries spent too; `lost`
 * records the requests that were served and not kept (aborted, failed). Together, every request
 * the provider served. The stores' SQL totals (sqliteStore, postgresStore) sum the same fields.
 */
export function requestSpend(record: JournalRecord): RequestSpend | undefined {
  if (record.type === 'usage') {
    return { requests: record.requests ?? 1, usage: record.lost ? addUsage(record.request, record.lost) : record.request };
  }
  if (record.type === 'lost') return { requests: record.requests, usage: record.usage };
  return undefined;
}
