/** `PRAGMA application_id` of every exarch database ('EXAR'): tells ours from anyone else's SQLite file. */
export const EXARCH_APPLICATION_ID = 0x45584152;

/**
 * A run's share of the `bursts` key space: a burst's key is `runs.num * SEQ_SPAN + seq`. Seqs
 * stay below it (four billion records a run), and run numbers up to MAX_RUN_NUMBER keep every key
 * an exact JavaScript number.
 */
export const SEQ_SPAN = 2 ** 32;
export const MAX_RUN_NUMBER = Math.floor(Number.MAX_SAFE_INTEGER / SEQ_SPAN) - 1;

/**
 * Schema steps by the `user_version` they lead to, each run once, all pending ones in one
 * transaction. Never edit a released step: add the next one.
 *
 * `bursts` is one b-tree and has no other index: a commit writes one page of it, not three (the
 * row, its key index and a totals index), which was a quarter of a durable step's time. A row is a
 * whole burst (since schema 2: the records one `append` writes, consecutive seqs `seq`..`last`, as
 * a JSON array of [session, ts, record]): one insert per commit instead of one per record took a
 * durable step from 185–200 to 130–160 µs on a heavily loaded machine (A/B, same build). Since
 * schema 3 its key is one integer, the run's number (`runs.num`) times SEQ_SPAN plus the burst's
 * first seq, where schema 2 keyed a WITHOUT ROWID table by (run id, seq): SQLite splits a full
 * page of an integer-keyed table at its right edge (new rows only ever land there) by starting a
 * new page, and a page keyed otherwise by sharing out its rows with its siblings, which left the
 * last page half full, split again three bursts later, four to six pages rewritten each time. An
 * append of 660 bytes wrote 10.5 KB to the disk and took 34.5 µs, now 5.5 KB and 25.5 µs (raw
 * inserts, same machine, interleaved). The view `journal` shows one row per record, as schema 1
 * stored them, for people and tools reading the file. `listRuns` reads totals from `runs`,
 * written when a run is released; only runs that are not (running, or left by a dead process) are
 * totalled from their own journal, by their key range.
 */
export const MIGRATIONS: Readonly<Record<number, string>> = {
  1: `
    CREATE TABLE runs (
      id TEXT PRIMARY KEY NOT NULL,
      task TEXT NOT NULL,
      cwd TEXT NOT NULL,
      options TEXT NOT NULL,
      started_at INTEGER NOT NULL,
      status TEXT NOT NULL,
      owner_host TEXT,
      owner_pid INTEGER,
      owner_token TEXT,
      lease_until INTEGER NOT NULL DEFAULT 0,
      ended_at INTEGER,
      agents INTEGER,
      requests INTEGER,
      input_tokens INTEGER,
      output_tokens INTEGER,
      cache_creation_input_tokens INTEGER,
      cache_read_input_tokens INTEGER
    );
    CREATE TABLE journal (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      session TEXT NOT NULL,
      ts INTEGER NOT NULL,
      type TEXT NOT NULL,
      body TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
  `,
  2: `
    CREATE TABLE bursts (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      last INTEGER NOT NULL,
      records TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    INSERT INTO bursts (run_id, seq, last, records)
      SELECT run_id, seq, seq, json_array(json_array(session, ts, json(body))) FROM journal;
    DROP TABLE journal;
    CREATE VIEW journal (run_id, seq, session, ts, type, body) AS
      SELECT b.run_id, b.seq + r.key, r.value ->> 0, r.value ->> 1, r.value -> 2 ->> 'type', r.value ->> 2
      FROM bursts AS b, json_each(b.records) AS r;
  `,
  3: `
    ALTER TABLE runs ADD COLUMN num INTEGER;
    UPDATE runs SET num = rowid;
    CREATE UNIQUE INDEX runs_by_num ON runs (num);
    CREATE TABLE bursts_by_key (
      key INTEGER PRIMARY KEY NOT NULL,
      last INTEGER NOT NULL,
      records TEXT NOT NULL
    );
    INSERT INTO bursts_by_key (key, last, records)
      SELECT u.num * ${SEQ_SPAN} + b.seq, b.last, b.records FROM bursts AS b JOIN runs AS u ON u.id = b.run_id ORDER BY 1;
    -- (A burst of no run is left behind: nothing could read it, every way in starts from a run.)
    DROP VIEW journal;
    DROP TABLE bursts;
    ALTER TABLE bursts_by_key RENAME TO bursts;
    CREATE VIEW journal (run_id, seq, session, ts, type, body) AS
      SELECT u.id, b.key - u.num * ${SEQ_SPAN} + r.key, r.value ->> 0, r.value ->> 1, r.value -> 2 ->> 'type', r.value ->> 2
      FROM runs AS u
      JOIN bursts AS b ON b.key >= u.num * ${SEQ_SPAN} AND b.key < (u.num + 1) * ${SEQ_SPAN},
      json_each(b.records) AS r;
  `,
};

/** The newest schema this exarch reads and writes. */
export const SCHEMA_VERSION = Math.max(...Object.keys(MIGRATIONS).map(Number));
