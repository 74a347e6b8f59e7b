import type PgBoss from 'pg-boss';
import { describeError } from '../engine/model/errors.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import type { ProgressBoard } from './progress.js';
import type { RunIo } from './runIo.js';
import { TerminalInput } from './terminalInput.js';

/**
 * Steering a run the workers run: the lines typed (on a terminal, or from stdin with `--steer`) go
 * to the run's worker through the store, and what it said comes back the same way.
 */
export class StoredSteering {
  /** What the person types, read as a run here reads it; the approval questions share it. Undefined without a terminal or `--steer`. */
  readonly input: TerminalInput | undefined;
  /** Lines sent whose answer is not shown yet. */
  private readonly sent = new Set<number>();
  /** One at a time, in the order typed: the worker acts on lines in the order the store numbered them. */
  private sending: Promise<void> = Promise.resolve();
  /** A spread run's steering queues jobs: a queue opened on the first line, stopped at the end. */
  private boss: Promise<PgBoss> | undefined;

  constructor(
    private readonly store: PostgresRunStore,
    private readonly id: string,
    private readonly db: string,
    private readonly board: ProgressBoard,
    io: RunIo,
    { onTerminal, steer, spread }: { readonly onTerminal: boolean; readonly steer: boolean; readonly spread: boolean },
  ) {
    this.input =
      io.stdin && (onTerminal || steer)
        ? new TerminalInput({
            input: io.stdin,
            output: io.stderr,
            terminal: onTerminal,
            onCommand: (line) => this.send(line, spread),
            onRefused: (answer) => board.print(answer),
            onCommandOpen: () => board.pause(),
            onCommandClose: () => board.resume(),
            // Raw mode keeps Ctrl-C from the terminal's signal: raised here as the terminal would.
            onInterrupt: () => process.kill(process.pid, 'SIGINT'),
          })
        : undefined;
  }

  private send(line: string, spread: boolean): void {
    const { store, id, board } = this;
    if (line.trim() === '') return;
    if (spread) {
      // Acted on through the store at once, wherever the agent runs or waits (`steerSpreadRun`).
      this.sending = this.sending.then(async () => {
        try {
          const { steerSpreadRun } = await import('../workers/spreadSteering.js');
          for (const answer of await steerSpreadRun(store, await this.steeringBoss(), id, line)) board.print(answer);
        } catch (error) {
          board.print(`exarch: the line was not sent to the run: ${describeError(error)}`);
        }
      });
      return;
    }
    this.sending = this.sending.then(() =>
      store.sendCommand(id, line).then(
        (number) => void this.sent.add(number),
        (error: unknown) => board.print(`exarch: the line was not sent to the run: ${describeError(error)}`),
      ),
    );
  }

  private steeringBoss(): Promise<PgBoss> {
    this.boss ??= import('../workers/runQueue.js').then(({ startBoss }) => startBoss(this.db));
    return this.boss;
  }

  /** Prints the worker's answers to the lines sent, as they have come back. */
  async showAnswers(): Promise<void> {
    for (const { seq: number, answer } of await this.store.answers([...this.sent])) {
      this.sent.delete(number);
      for (const line of answer.split('\n')) this.board.print(line);
    }
  }

  /** Once the run has stopped: the lines being sent are in, the answers given shown, and the lines no worker took withdrawn (how many). */
  async settle(): Promise<number> {
    // Lines still being sent, and answers given as the run ended, are in by now.
    await this.sending;
    await this.showAnswers();
    return this.store.withdrawCommands([...this.sent]);
  }

  /** Waits for the lines being sent, and stops the steering queue if one was opened. */
  async finish(): Promise<void> {
    await this.sending;
    if (this.boss) await (await this.boss).stop({ graceful: false, wait: true });
  }
}
