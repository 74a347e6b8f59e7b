import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { responseEvents, type ReceivedRequest, type SseEvent } from './anthropicServer.js';

/** What a hostile model (or server) sends, and the oracles the issue-13 tests check it with. */

/** `n` nested arrays as JSON text: `[[[…]]]`, 2·n characters. */
export const nestedArrays = (n: number): string => '['.repeat(n) + ']'.repeat(n);

/** A response whose one tool call streams `json` verbatim as its input (valid or not), in one delta. */
export function rawToolCall(name: string, json: string, id = 'toolu_raw'): SseEvent[] {
  const out: SseEvent[] = [];
  let sent = false;
  for (const event of responseEvents({ toolCalls: [{ id, name, input: {} }] })) {
    const data = event.data as { type: string; delta?: { type: string } };
    if (data.type === 'content_block_delta' && data.delta?.type === 'input_json_delta') {
      if (!sent)
        out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: json } } });
      sent = true;
      continue;
    }
    out.push(event);
  }
  return out;
}

/** Every line of a JSONL file, parsed; a line that is not JSON fails with the file and line number. */
export function jsonLines(file: string): Record<string, unknown>[] {
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '');
  return lines.map((line, i) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch (error) {
      throw new Error(`${file}:${i + 1} is not JSON (${String(error)}): ${line.slice(0, 200)}`);
    }
  });
}

/** Every `.jsonl` file of a directory, parsed line by line, by file name. */
export function jsonlDir(dir: string): Map<string, Record<string, unknown>[]> {
  return new Map(
    readdirSync(dir)
      .filter((file) => file.endsWith('.jsonl'))
      .map((file) => [file, jsonLines(join(dir, file))]),
  );
}

const LONE_ESCAPE = /\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i;
const LONE_UNIT = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether a text holds a lone surrogate, as a code unit or as a JSON escape (`\ud800` not followed by a low one). */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_UNIT.test(text) || LONE_ESCAPE.test(text);
}

/** The request bodies (as the server parsed them, written out again) that hold a lone surrogate. */
export function loneSurrogatesIn(requests: readonly ReceivedRequest[]): number[] {
  return requests.filter((r) => hasLoneSurrogate(JSON.stringify(r.body))).map((r) => r.index);
}

/** The `tool_result` blocks of a request's last message, with whether each is an error. */
export function toolResultsOf(request: ReceivedRequest | undefined): { id: string; isError: boolean; content: string }[] {
  const last = request?.body.messages.at(-1);
  if (!last || typeof last.content === 'string') return [];
  return last.content
    .filter((b) => b.type === 'tool_result')
    .map((b) => ({
      id: String(b['tool_use_id']),
      isError: b['is_error'] === true,
      content: typeof b['content'] === 'string' ? b['content'] : JSON.stringify(b['content']),
    }));
}
