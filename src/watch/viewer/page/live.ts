/**
 * A live page follows its run: the server (src/watch/viewer/liveServer.ts) streams each new trace record
 * as a server-sent event (`id` its index, `data` the record), then `end` once the run has ended.
 * After a dropped connection the browser reconnects by itself and the server resumes after the
 * last id it got, so nothing is missed or shown twice. `events` carries the server's token
 * (`events?token=…`), which every request to it needs.
 */
function followLive(events: string, from: number, onRecord: (record: TraceRecord) => void, onStatus: (status: 'open' | 'ended' | 'retrying') => void): void {
  const url = new URL(events, location.href);
  url.searchParams.set('from', String(from));
  const source = new EventSource(url.href);
  source.onopen = () => onStatus('open');
  source.onmessage = (message: MessageEvent<string>) => onRecord(JSON.parse(message.data) as TraceRecord);
  source.addEventListener('end', () => {
    source.close();
    onStatus('ended');
  });
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) onStatus('retrying');
  };
}
