import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createSessionActor, waitForSettled } from 'exarch';
import { otelExporter } from 'exarch/otel';
import { scriptedProvider } from 'exarch/testing';

// The host's OpenTelemetry SDK. In production: an OTLP exporter to your collector, registered once.
const memory = new InMemorySpanExporter();
const tracing = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });

const provider = scriptedProvider({
  model: 'claude-sonnet-5-5',
  agents: {
    root: [
      {
        calls: [
          { name: 'agent', input: { name: 'researcher', task: 'Why do logins fail?' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      { text: 'The session cookie is not renewed.' },
    ],
    researcher: [{ calls: [{ name: 'reply', input: { result: 'cookie not renewed' } }], usage: { inputTokens: 120, outputTokens: 15 } }],
  },
});
const actor = createSessionActor({ provider, task: 'Why do logins fail?' });
const stop = otelExporter(actor, { tracer: tracing.getTracer('exarch') }); // captureContent: true exports messages too
actor.start();
await waitForSettled(actor);
actor.stop();
stop();

const spans = memory.getFinishedSpans();
const researcherChat = spans.find((span) => span.name === 'chat claude-sonnet-5-5' && span.attributes['gen_ai.usage.output_tokens'] === 15);
console.log(
  spans
    .map((span) => span.name)
    .sort()
    .join(', '),
);
// chat claude-sonnet-5-5, chat claude-sonnet-5-5, chat claude-sonnet-5-5, execute_tool agent, execute_tool reply, execute_tool wait_for_agents, invoke_agent researcher, invoke_agent root
console.log(researcherChat?.attributes['gen_ai.usage.input_tokens']); // 120
export { spans };
