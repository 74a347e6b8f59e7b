/**
 * `exarch/postgres`: runs kept in PostgreSQL and worked on by a pool of workers (pg-boss). Its
 * own entry point, as `exarch/sqlite` is: a host that does not ask for it loads neither pg nor
 * pg-boss.
 */
export { openPostgresStore, PostgresRunStore } from './store/postgresStore.js';
export { POSTGRES_SCHEMA_VERSION } from './store/postgresSchema.js';
export type { PostgresStoreOptions } from './store/postgresConnection.js';
export { describeUrl, isPostgresUrl } from './store/postgresUrl.js';
export { queueRun, RUN_QUEUE, startBoss, submitRun, type QueuePolicy, type RunJob, type Submission } from './workers/runQueue.js';
export { startWorker } from './workers/worker.js';
export type { Worker, WorkerEvent, WorkerOptions, WorkerRunPlace, WorkerSession } from './workers/workerOptions.js';
export { recordSpreadApproval } from './workers/spreadApprovals.js';
export { requeueSpreadRun } from './workers/spreadResume.js';
export { steerSpreadRun } from './workers/spreadSteering.js';
