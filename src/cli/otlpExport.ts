import type { Tracer } from '@opentelemetry/api';
import { PlannedIds } from '../watch/otel/plannedIds.js';
import { OtelRunExporter } from '../watch/otel/otelExporter.js';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ExarchError } from '../engine/exarchError.js';
import { describeError } from '../engine/model/errors.js';
import { MAX_TIMER_MS } from '../engine/maxTimer.js';
import { redactUrl } from '../engine/urlSecrets.js';

/** How much longer than the exporter's own timeout `finish` waits for it. */
const FINISH_GRACE_MS = 2_000;

/**
 * `exarch run --otel`: the run's spans (src/watch/otel/otelExporter.ts) go to an OTLP/HTTP collector,
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given,
 * as JSON bodies. The SDK is loaded only for a run that asks for it. Spans are batched while the
 * run goes and flushed before the command exits, within the exporter's timeout
 * (`OTEL_EXPORTER_OTLP_TIMEOUT`, default 10 s): a collector that cannot be reached costs one line
 * on stderr and at most that long, never the run's answer or a hung exit.
 *
 * The collector's credentials go in `OTEL_EXPORTER_OTLP_HEADERS` (or `_TRACES_HEADERS`:
 * `Authorization=Bearer%20…`), which the exporter sends with every request, as the specification
 * says; they are never printed (src/engine/redact.ts), and an endpoint's own secrets (a user part,
 * a `?token=`) are masked wherever the endpoint is named.
 */

/** `--otel` cannot be set up as asked (no endpoint, not a URL, gRPC): one line, exit 1. */
export class OtelSetupError extends ExarchError<'otel-setup'> {
  constructor(message: string) {
    super('otel-setup', message);
  }
}

export interface OtlpExport {
  readonly tracer: Tracer;
  /** The provider's id generator: a worker's agent spans are planned and emitted whole by the job where a session ends. */
  readonly ids: PlannedIds;
  /** Where spans go, as it may be shown (its secrets masked: `redactUrl`). */
  readonly url: string;
  /** `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: message content is exported too. */
  readonly captureContent: boolean;
  /** The spans of one run here, sent through this export (made here: the CLI loads OTel only with --otel). */
  runSpans(): OtelRunExporter;
  /** Flushes and shuts down; says how it went in one line (for stderr). */
  finish(): Promise<string>;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** `ExportResultCode.SUCCESS` of @opentelemetry/core. */
const EXPORT_SUCCESS = 0;

type ExportResult = Parameters<Parameters<SpanExporter['export']>[1]>[0];

/** Where the traces go, from the environment as the OTLP exporter specification reads it. */
function otlpTracesUrl(env: NodeJS.ProcessEnv): string {
  const protocol = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'];
  if (protocol !== undefined && protocol !== '' && !protocol.startsWith('http/')) {
    throw new OtelSetupError(
      `--otel sends OTLP over HTTP; OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported (use http/json or http/protobuf, port 4318)`,
    );
  }
  const specific = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];
  const general = env['OTEL_EXPORTER_OTLP_ENDPOINT'];
  const [name, raw] = specific ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', specific] : ['OTEL_EXPORTER_OTLP_ENDPOINT', general];
  if (!raw) throw new OtelSetupError('--otel needs OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP/HTTP collector to send spans to (e.g. http://localhost:4318)');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OtelSetupError(`${name} is not a URL: '${redactUrl(raw)}' (e.g. http://localhost:4318)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OtelSetupError(`${name} must be an http:// or https:// URL, got '${redactUrl(raw)}'`);
  // The general endpoint is a base: the signal's path is appended (OTLP exporter specification).
  return specific ? url.href : `${raw.replace(/\/+$/, '')}/v1/traces`;
}

/** Starts the SDK pipeline for one run: a tracer whose spans are batched to the collector. */
export async function startOtlpExport(env: NodeJS.ProcessEnv): Promise<OtlpExport> {
  const url = otlpTracesUrl(env);
  const shown = redactUrl(url);
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const timeoutRaw = Number(env['OTEL_EXPORTER_OTLP_TRACES_TIMEOUT'] ?? env['OTEL_EXPORTER_OTLP_TIMEOUT']);
  // As OpenTelemetry's SDKs treat an invalid value: the default. Past what a timer holds (less the
  // grace `finish` adds) is one: the timer would fire at once, not wait.
  const timeoutMs = Number.isFinite(timeoutRaw) && timeoutRaw > 0 && timeoutRaw <= MAX_TIMER_MS - FINISH_GRACE_MS ? timeoutRaw : DEFAULT_TIMEOUT_MS;
  const exporter = new ReportingExporter(new OTLPTraceExporter({ url, timeoutMillis: timeoutMs }));
  const ids = new PlannedIds();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env['OTEL_SERVICE_NAME'] || 'exarch' }),
    idGenerator: ids,
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('exarch');
  const captureContent = env['OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT']?.toLowerCase() === 'true';
  return {
    tracer,
    ids,
    url: shown,
    captureContent,
    runSpans: () => new OtelRunExporter({ tracer, captureContent }),
    async finish() {
      // The exporter gives up by its own timeout; this bound is for anything that would not.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), timeoutMs + FINISH_GRACE_MS);
        timer.unref();
      });
      const outcome = await Promise.race([
        provider.shutdown().then(
          () => 'done' as const,
          (error: unknown) => error,
        ),
        late,
      ]);
      clearTimeout(timer);
      if (outcome === 'late') return `--otel: the spans could not be sent to ${shown}: no answer within ${Math.round(timeoutMs / 1000)} s`;
      const failure = exporter.failure ?? (outcome === 'done' ? undefined : outcome);
      if (failure !== undefined)
        return `--otel: ${exporter.failed} of ${exporter.sent + exporter.failed} spans could not be sent to ${shown}: ${describeError(failure)}`;
      return `--otel: ${exporter.sent} span${exporter.sent === 1 ? '' : 's'} sent to ${shown}`;
    },
  };
}

/**
 * The OTLP exporter, counting what it sent and keeping its first failure: the SDK reports export
 * errors only to its diagnostic logger, and the command line has one line to say it with.
 */
class ReportingExporter implements SpanExporter {
  sent = 0;
  failed = 0;
  failure: unknown;

  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === EXPORT_SUCCESS) this.sent += spans.length;
      else {
        this.failed += spans.length;
        this.failure ??= result.error ?? new Error('the export failed');
      }
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
