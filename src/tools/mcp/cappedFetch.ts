/**
 * `fetch`, with the body of a message's response (POST) cut off past `maxBytes`: a server cannot
 * make exarch buffer an unbounded answer. The long-lived GET event stream is left alone.
 * `onOversize` is told once, with the error the body stream fails with, so that the caller can fail
 * the requests that response was to answer (the SDK would wait for the rest of the stream).
 *
 * @example
 * const fetchAtMost = cappedFetch(4 * 1024 * 1024, (error) => console.error(error.message));
 * const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: fetchAtMost });
 */
export function cappedFetch(maxBytes: number, onOversize: (error: Error) => void): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (url, init) => {
    const response = await fetch(url, init);
    if (init?.method !== 'POST' || !response.body) return response;
    let seen = 0;
    const capped = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          seen += chunk.byteLength;
          if (seen <= maxBytes) return controller.enqueue(chunk);
          const error = new Error(`a response exceeded ${maxBytes} bytes`);
          controller.error(error);
          onOversize(error);
        },
      }),
    );
    return new Response(capped, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
