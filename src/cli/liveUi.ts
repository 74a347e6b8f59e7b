import type { RunEventListener } from '../watch/observe/events.js';
import type { TraceRecord } from '../watch/trace/format.js';
import { startLiveViewer, startTraceServer, type LiveViewer, type TraceServer } from '../watch/viewer/liveServer.js';

/**
 * `--ui` on `run`, `resume` and `demo`: the turn-flow viewer served live on 127.0.0.1 (any free
 * port, or `--ui-port N`), its address on stderr before the run starts, with the token every
 * request to it needs (made anew by each process and kept nowhere else: not in the run's record,
 * so a resume or a follower prints one of its own).
 *
 * When the run ends the page says so, and the answer goes to stdout as always. Then, when a person
 * is watching (stderr is a terminal), the page goes on being served until Ctrl-C, so a browser
 * opened late still shows the whole run, and the exit code is the run's; otherwise (a pipe, CI, a
 * test) the server closes at once and the command ends as it would without `--ui`.
 */
export class CliUi {
  private constructor(
    private readonly viewer: LiveViewer | TraceServer,
    private readonly stderr: NodeJS.WritableStream & { isTTY?: boolean },
  ) {}

  /** Starts the viewer for a run here, fed its events (`port` is already checked: see `uiPort` in runChecks.ts). */
  static async start(
    options: { readonly port?: number; readonly title: string; readonly model?: string },
    stderr: NodeJS.WritableStream & { isTTY?: boolean },
  ): Promise<CliUi> {
    const viewer = await startLiveViewer({
      title: options.title,
      ...(options.port === undefined ? {} : { port: options.port }),
      ...(options.model === undefined ? {} : { model: options.model }),
    });
    return CliUi.announced(viewer, stderr);
  }

  /** Starts the viewer for a run followed from its journal (`run --db`), fed its trace records. */
  static async startFed(options: { readonly port?: number }, stderr: NodeJS.WritableStream & { isTTY?: boolean }): Promise<CliUi> {
    return CliUi.announced(await startTraceServer(options.port === undefined ? {} : { port: options.port }), stderr);
  }

  private static announced(viewer: LiveViewer | TraceServer, stderr: NodeJS.WritableStream & { isTTY?: boolean }): CliUi {
    stderr.write(`exarch: live turn flow at ${viewer.url} (open it in a browser)\n`);
    return new CliUi(viewer, stderr);
  }

  /** The run's events, for its observer (a viewer started with `start`). */
  get onEvent(): RunEventListener {
    const viewer = this.viewer;
    return 'onEvent' in viewer ? viewer.onEvent : () => undefined;
  }

  /** The run's trace records (a viewer started with `startFed`). */
  readonly onRecord = (record: TraceRecord): void => {
    if ('push' in this.viewer) this.viewer.push(record);
  };

  /** The run ended: the page shows its end (called before the answer is printed). */
  end(): void {
    this.viewer.end();
  }

  get url(): string {
    return this.viewer.url;
  }

  /** After the command's output: on a terminal, keeps serving until `stop` is aborted (Ctrl-C); then closes the server. */
  async finish(stop: AbortSignal): Promise<void> {
    this.viewer.end();
    if (this.stderr.isTTY === true && !stop.aborted) {
      this.stderr.write(`exarch: still serving the turn flow at ${this.viewer.url}; press Ctrl-C to quit\n`);
      await new Promise<void>((resolve) => stop.addEventListener('abort', () => resolve(), { once: true }));
    }
    await this.close();
  }

  async close(): Promise<void> {
    await this.viewer.close();
  }
}
