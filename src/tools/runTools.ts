import { fromCallback, type EventObject } from 'xstate';
import { describeError } from '../model/errors.js';
import { clip, renderValue } from '../render.js';
import type { AgentIdentity, ToolResultBlock } from '../types.js';
import type { PreparedRun } from './defineTool.js';

export interface RunnableCall {
  readonly id: string;
  readonly name: string;
  readonly run: PreparedRun;
  readonly timeoutMs: number;
}

export interface RunToolsInput {
  readonly agent: AgentIdentity;
  readonly calls: readonly RunnableCall[];
  /** Tool output is rendered by the shared renderer and clipped to this many characters. */
  readonly outputCap: number;
  /** Called on teardown, with the ids still running, when the batch was abandoned (cancelled or stopped) before it drained. */
  readonly onAbandon: (pendingIds: readonly string[]) => void;
}

export type ToolBatchEvent =
  | { readonly type: 'tool.settled'; readonly result: ToolResultBlock }
  | { readonly type: 'batch.drained' };

/**
 * Runs every call of a batch concurrently, reports each result as a `tool.settled` event and then
 * `batch.drained` — always asynchronously, even for a batch with nothing to run, so the session
 * rests in `dispatchingBatch` where inspectors see it. A throw or a timeout becomes an `is_error`
 * result; teardown aborts whatever still runs.
 */
export const runTools = fromCallback<EventObject, RunToolsInput, ToolBatchEvent>(({ input, sendBack }) => {
  const pending = new Set(input.calls.map((c) => c.id));
  const teardown = new AbortController();
  let drained = false;
  const drain = (): void => {
    drained = true;
    sendBack({ type: 'batch.drained' });
  };
  if (pending.size === 0) {
    queueMicrotask(() => {
      if (!teardown.signal.aborted) drain();
    });
  }
  for (const call of input.calls) {
    void runOne(call, input, teardown.signal).then((result) => {
      if (teardown.signal.aborted) return;
      pending.delete(call.id);
      sendBack({ type: 'tool.settled', result });
      if (pending.size === 0) drain();
    });
  }
  return () => {
    teardown.abort(new Error('tool batch cancelled'));
    // Abandoned before it drained, even with nothing left to run: a batch of protocol calls only
    // (answered as it opened) is stopped before its drain too, and its results are not committed.
    if (!drained) input.onAbandon([...pending]);
  };
});

export async function runOne(call: RunnableCall, input: Pick<RunToolsInput, 'agent' | 'outputCap'>, outer: AbortSignal): Promise<ToolResultBlock> {
  const controller = new AbortController();
  const onOuterAbort = (): void => controller.abort(outer.reason);
  outer.addEventListener('abort', onOuterAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(`tool '${call.name}' timed out after ${call.timeoutMs} ms`);
      controller.abort(error);
      reject(error);
    }, call.timeoutMs);
  });
  try {
    const value = await Promise.race([call.run({ agent: input.agent, toolUseId: call.id, signal: controller.signal }), timedOut]);
    return { type: 'tool_result', tool_use_id: call.id, content: clip(renderValue(value), input.outputCap) || '(no output)' };
  } catch (error) {
    const message = describeError(error);
    const content = message.startsWith(`tool '${call.name}'`) ? message : `tool '${call.name}' failed: ${message}`;
    return { type: 'tool_result', tool_use_id: call.id, content: clip(content, input.outputCap), is_error: true };
  } finally {
    clearTimeout(timer);
    outer.removeEventListener('abort', onOuterAbort);
  }
}
