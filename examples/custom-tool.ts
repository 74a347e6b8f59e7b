import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { defineTool, runAgent } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

const workspace = mkdtempSync(join(tmpdir(), 'exarch-'));
writeFileSync(join(workspace, 'a.md'), 'hello from a\n');

// A host tool: the zod schema validates every call and is the JSON Schema the model is shown.
const wordCount = defineTool({
  name: 'word_count',
  description: 'Count the words of a UTF-8 file in the workspace',
  input: z.object({ path: z.string().min(1) }),
  readOnly: true,
  run: async ({ path }, { signal }) => {
    const text = await readFile(join(workspace, path), { encoding: 'utf8', signal });
    return { path, words: text.split(/\s+/).filter(Boolean).length };
  },
});
console.log(JSON.stringify(wordCount.spec.input_schema)); // {"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"]}

// The model calls it twice, once without the path: that call is answered with an error naming
// the field, the other with the tool's result, and the session carries on.
const provider = scriptedProvider({
  agents: {
    root: [
      {
        calls: [
          { name: 'word_count', input: { path: 'a.md' } },
          { name: 'word_count', input: { file: 'a.md' } },
        ],
      },
      { text: 'a.md has 3 words.' },
    ],
  },
});
const result = await runAgent('How many words are in a.md?', { provider, tools: [wordCount] });
const answers = (provider.requestsOf('root')[1]?.lastMessage?.content ?? []).flatMap((block) =>
  block.type === 'tool_result' ? [{ error: block.is_error === true, content: block.content }] : [],
);
for (const answer of answers) console.log(answer.error ? 'error:' : 'result:', answer.content);
// result: { "path": "a.md", "words": 3 }   (pretty-printed)
// error: invalid input for tool 'word_count': path: Invalid input: expected string, received undefined
console.log(result.state, result.text); // readyForUser a.md has 3 words.
rmSync(workspace, { recursive: true });
export { answers, result };
