import { deadlines } from '../engine/deadlines.js';
import { describeError } from '../engine/model/errors.js';
import { clip, renderValue } from '../engine/render.js';
import type { AgentIdentity, ToolResultBlock } from '../engine/types.js';
import type { PreparedRun, ToolContext } from './defineTool.js';
import { ToolErrorResult } from './toolErrorResult.js';

export interface RunnableCall {
  readonly id: string;
  readonly name: string;
  readonly run: PreparedRun;
  readonly timeoutMs: number;
  /** See `Tool.readOnly`. */
  readonly readOnly: boolean;
}

export interface RunToolsInput {
  readonly agent: AgentIdentity;
  readonly calls: readonly RunnableCall[];
  /** Tool output is rendered by the shared renderer and clipped to this many characters. */
  readonly outputCap: number;
  /** Called with the ids still running when the batch is abandoned (cancelled or stopped) before it drained. */
  readonly onAbandon: (pendingIds: readonly string[]) => void;
}

export type ToolBatchEvent =
  | { readonly type: 'tool.settled'; readonly result: ToolResultBlock }
  /** The batch is over. `result` is the call whose result ended it; a batch with nothing to run has none. */
  | { readonly type: 'batch.drained'; readonly result?: ToolResultBlock };

/** A running batch. */
export interface ToolBatch {
  /** Aborts what still runs; if the batch had not drained, reports it through `onAbandon`. */
  abandon(reason: unknown): void;
}

/**
 * Runs every call of a batch concurrently and reports each result as a `tool.settled` event, except
 * the last, which comes with `batch.drained` (one event rather than two: for the usual batch of
 * one call, that is a third of a step's transitions). Always asynchronously, even for a batch with
 * nothing to run, so the session rests in `dispatchingBatch` where inspectors see it. A throw or a
 * timeout becomes an `is_error` result; `abandon` aborts whatever still runs and silences the rest.
 */
export function startToolBatch(input: RunToolsInput, send: (event: ToolBatchEvent) => void): ToolBatch {
  const pending = new Set(input.calls.map((c) => c.id));
  let drained = false;
  let abandoned = false;
  // Per-call controllers exist only for tools that read `signal` (see runOne).
  const controllers: AbortController[] = [];
  if (pending.size === 0) {
    queueMicrotask(() => {
      if (abandoned) return;
      drained = true;
      send({ type: 'batch.drained' });
    });
  }
  const batch = { controllers, isAbandoned: () => abandoned };
  const settled = (result: ToolResultBlock): void => {
    if (abandoned) return;
    pending.delete(result.tool_use_id);
    if (pending.size > 0) {
      send({ type: 'tool.settled', result });
      return;
    }
    drained = true;
    send({ type: 'batch.drained', result });
  };
  for (const call of input.calls) runOne(call, input, batch, settled);
  return {
    abandon(reason) {
      if (abandoned) return;
      abandoned = true;
      for (const controller of controllers) controller.abort(reason);
      // Abandoned before it drained, even with nothing left to run: a batch of protocol calls only
      // (answered as it opened) is stopped before its drain too, and its results are not committed.
      if (!drained) input.onAbandon([...pending]);
    },
  };
}

interface BatchHandle {
  readonly controllers: AbortController[];
  isAbandoned(): boolean;
}

/**
 * Runs one call with its time limit and hands its result to `settled`, once, never synchronously
 * (the tool's own promise, or its time limit, settles it). The call's `AbortSignal` is made on
 * first use: most tools never read it, and a controller per call is a measurable share of a short
 * step. A callback rather than a promise of the result: that promise and its reaction were two of
 * a step's ten promises.
 */
function runOne(call: RunnableCall, input: Pick<RunToolsInput, 'agent' | 'outputCap'>, batch: BatchHandle, settled: (result: ToolResultBlock) => void): void {
  let controller: AbortController | undefined;
  let done = false;
  const context: ToolContext = {
    agent: input.agent,
    toolUseId: call.id,
    get signal() {
      if (!controller) {
        controller = new AbortController();
        if (batch.isAbandoned()) controller.abort(new Error('tool batch cancelled'));
        batch.controllers.push(controller);
      }
      return controller.signal;
    },
  };
  const finish = (result: ToolResultBlock): void => {
    if (done) return;
    done = true;
    deadline.cancel();
    settled(result);
  };
  const fail = (error: unknown): void => {
    if (error instanceof ToolErrorResult) {
      finish({ type: 'tool_result', tool_use_id: call.id, content: clip(error.content, input.outputCap) || '(no output)', is_error: true });
      return;
    }
    const message = describeError(error);
    const content = message.startsWith(`tool '${call.name}'`) ? message : `tool '${call.name}' failed: ${message}`;
    finish({ type: 'tool_result', tool_use_id: call.id, content: clip(content, input.outputCap), is_error: true });
  };
  const deadline = deadlines.add(call.timeoutMs, () => {
    const error = new Error(`tool '${call.name}' timed out after ${call.timeoutMs} ms`);
    controller?.abort(error);
    fail(error);
  });
  let running: Promise<unknown>;
  try {
    running = call.run(context);
  } catch (error) {
    running = Promise.reject(error);
  }
  running.then((value) => finish({ type: 'tool_result', tool_use_id: call.id, content: clip(renderValue(value), input.outputCap) || '(no output)' }), fail);
}
