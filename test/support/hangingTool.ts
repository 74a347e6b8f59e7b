import { z } from 'zod';
import { defineTool } from '../../src/index.js';

/**
 * A tool named `wait` that runs until its call is aborted, keeping each abort's reason; `running`
 * settles once a call has started (so a test can act while the tool is in flight).
 */
export function hangingTool() {
  const reasons: string[] = [];
  let started: () => void = () => undefined;
  const running = new Promise<void>((resolve) => (started = resolve));
  const wait = defineTool({
    name: 'wait',
    description: 'Waits until aborted.',
    input: z.object({}),
    run: (_input, { signal }) =>
      new Promise<string>((_resolve, reject) => {
        started();
        signal.addEventListener('abort', () => {
          reasons.push(signal.reason instanceof Error ? signal.reason.message : String(signal.reason));
          reject(new Error('aborted'));
        });
      }),
  });
  return { wait, running, reasons };
}
