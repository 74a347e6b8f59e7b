import type { ReceivedRequest, ResponseSpec, ServerPlan } from './anthropicServer.js';
import { lastUserText, stream } from './cliHarness.js';

/** A root turn that answers with what it was last told. */
export const echo = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard: ${lastUserText(request)}` });

/**
 * The researcher → reader part of the recording tests' trees: the researcher delegates to the
 * reader and waits; the reader runs `readerCalls` and replies with what they returned.
 */
export function researchScripts(readerCalls: NonNullable<ResponseSpec['toolCalls']>) {
  return {
    researcher: [
      stream({
        toolCalls: [
          { name: 'agent', input: { name: 'reader', task: 'Read notes.md' } },
          { name: 'wait_for_agents', input: {} },
        ],
      }),
      (r: ReceivedRequest) => stream({ toolCalls: [{ name: 'reply', input: { result: `researcher: ${lastUserText(r)}` } }] }),
    ],
    reader: [
      stream({ text: 'Reading.', toolCalls: [...readerCalls] }),
      (r: ReceivedRequest) => stream({ toolCalls: [{ name: 'reply', input: { result: lastUserText(r) } }] }),
    ],
  };
}
