import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onCleanup } from './cliHarness.js';

/**
 * An OTLP/HTTP collector for tests: a loopback HTTP server that takes `POST /v1/traces` and decodes
 * the OTLP JSON body (the encoding the exporter sends; the OTLP specification spells span kinds as
 * numbers, ids as hex, attributes as typed values). Closed when the test ends.
 */

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: AnyValue[] } };
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: AnyValue }[];
  status?: { code?: number; message?: string };
}
export interface Received {
  name: string;
  kind: number;
  id: string;
  parent: string | undefined;
  trace: string;
  attributes: Record<string, unknown>;
  status: number;
}

/** OTLP's `SPAN_KIND_INTERNAL` and `SPAN_KIND_CLIENT`; `STATUS_CODE_ERROR`. */
export const INTERNAL = 1;
export const CLIENT = 3;
export const STATUS_ERROR = 2;

function attributeValue(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(attributeValue);
  return undefined;
}

/**
 * The collector. Each post is kept with its path, content type and headers; `refuse` answers
 * every post with that status and a body of the caller's (one that echoes the request's
 * credentials, say) instead of taking its spans.
 */
export async function collector(options: { readonly refuse?: { readonly status: number; body(headers: IncomingHttpHeaders): string } } = {}): Promise<{
  url: string;
  spans: Received[];
  posts: { path: string; contentType: string | undefined; headers: IncomingHttpHeaders }[];
  serviceNames: string[];
}> {
  const spans: Received[] = [];
  const posts: { path: string; contentType: string | undefined; headers: IncomingHttpHeaders }[] = [];
  const serviceNames: string[] = [];
  const read = async (req: IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  const server = createServer((req, res) => {
    void read(req).then((text) => {
      posts.push({ path: req.url ?? '', contentType: req.headers['content-type'], headers: req.headers });
      if (options.refuse) {
        res.writeHead(options.refuse.status, { 'content-type': 'text/plain' });
        res.end(options.refuse.body(req.headers));
        return;
      }
      const body = JSON.parse(text) as {
        resourceSpans?: { resource?: { attributes?: { key: string; value: AnyValue }[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
      };
      for (const resource of body.resourceSpans ?? []) {
        const service = resource.resource?.attributes?.find((a) => a.key === 'service.name');
        if (service) serviceNames.push(String(attributeValue(service.value)));
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              name: span.name,
              kind: span.kind,
              id: span.spanId,
              parent: span.parentSpanId || undefined,
              trace: span.traceId,
              attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, attributeValue(a.value)])),
              status: span.status?.code ?? 0,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, posts, serviceNames };
}
