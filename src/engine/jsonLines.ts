/**
 * Reading a JSON-lines text (a trace, a recording): one JSON value per line. Both readers number
 * the lines the same way, so that an error names the line a person finds in an editor.
 */

/** One line of a JSON-lines text that holds something: its value, or that it is not JSON. */
export type JsonLine = { readonly line: number; readonly json: true; readonly value: unknown } | { readonly line: number; readonly json: false };

/**
 * The lines of `text` that are not blank, in order, each parsed, numbered from 1 as an editor
 * numbers them (blank lines count). Whitespace around a line is not part of it (a file written on
 * Windows ends its lines with `\r`). A line that is not JSON is handed on, not thrown: whether it
 * ends the reading or is left out is the reader's to say.
 *
 * @example
 * ```ts
 * for (const entry of jsonLines('{"kind":"a"}\n\nnot json\n'))
 *   console.log(entry.line, entry.json ? entry.value : 'not JSON'); // 1 { kind: 'a' }, then 3 'not JSON'
 * ```
 */
export function* jsonLines(text: string): Generator<JsonLine, void, undefined> {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]?.trim();
    if (!line) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      yield { line: i + 1, json: false };
      continue;
    }
    yield { line: i + 1, json: true, value };
  }
}
