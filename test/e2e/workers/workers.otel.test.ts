import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { ScriptedProvider } from '../../../src/testing/scriptedProvider.js';
import { openPostgresStore } from '../../../src/store/postgresStore.js';
import { OtelRunExporter } from '../../../src/watch/otel/otelExporter.js';
import { startBoss, submitRun } from '../../../src/workers/runQueue.js';
import { startWorker } from '../../../src/workers/worker.js';
import type { Worker, WorkerEvent } from '../../../src/workers/workerOptions.js';
import { postgresForFile } from '../../support/postgresServer.js';

/**
 * A whole run (not spread) handed back by a stopping worker and finished by another: its spans
 * are one trace, and the root's agent span is opened once, by the first worker; the second
 * continues under it.
 */

const postgres = postgresForFile('test/e2e/workers/workers.otel.test.ts');

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(!postgres.available)('a worker with OpenTelemetry', () => {
  it('a run taken up by another worker continues its trace under the agent spans the first opened', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const collected = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(collected)] }).getTracer('test');
    const provider = new ScriptedProvider({
      agents: {
        // The second request outlasts the first worker's drain: the run is handed back mid-turn.
        root: (_request, index) =>
          index === 0 ? { calls: [{ name: 'wait_for_agents', input: {} }] } : index === 1 ? { delayMs: 1_500, text: 'done' } : { text: 'done' },
      },
    });
    const events: WorkerEvent[] = [];
    const start = (): Promise<Worker> =>
      startWorker({
        db,
        pollingIntervalSeconds: 0.5,
        policy: { expireInSeconds: 30, retryDelaySeconds: 1 },
        session: (row, place) => {
          const exporter = new OtelRunExporter({ tracer, conversationId: row.id, directory: place.spans });
          return { input: { provider }, events: exporter.onEvent, close: async () => exporter.close() };
        },
        onEvent: (event) => events.push(event),
      });
    const store = openPostgresStore(db);
    const boss = await startBoss(db);
    try {
      const first = await start();
      const id = await submitRun(store, boss, { task: 'Answer.', cwd: process.cwd(), record: { tools: [] } });
      await until(() => provider.requestsOf('root').length === 2, 'the second request');
      await first.stop({ timeoutMs: 0 });
      expect(events.some((event) => event.type === 'handed-back')).toBe(true);
      const second = await start();
      try {
        await until(() => events.some((event) => event.type === 'finished'), 'the run to finish');
      } finally {
        await second.stop({ timeoutMs: 5_000 });
      }
      expect((await store.getRun(id))?.status).toBe('done');
    } finally {
      await boss.stop({ graceful: false, wait: true });
      await store.close();
    }
    const spans = collected.getFinishedSpans();
    const agents = spans.filter((span) => span.name.startsWith('invoke_agent'));
    expect(agents).toHaveLength(1);
    const rootSpan = agents[0]?.spanContext().spanId;
    expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(1);
    // Every request, on either worker, under the root's one span.
    const chats = spans.filter((span) => span.name.startsWith('chat'));
    expect(chats.length).toBeGreaterThanOrEqual(3);
    for (const chat of chats) expect(chat.parentSpanContext?.spanId).toBe(rootSpan);
  });
});
