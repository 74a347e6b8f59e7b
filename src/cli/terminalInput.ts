import { EventEmitter } from 'node:events';
import { createInterface, emitKeypressEvents, type Interface, type Key } from 'node:readline';
import { MAX_STEERING_LINE_CHARS, TOO_LONG_ANSWER } from '../engine/steeringLine.js';
import { readBoundedLines, type BoundedLines } from './boundedLines.js';

/** The prompt of a command line. */
const COMMAND_PROMPT = 'exarch> ';

export interface TerminalInputOptions {
  readonly input: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly output: NodeJS.WritableStream & { columns?: number };
  /**
   * A terminal: raw mode with line editing, where typing a key opens a command line. Otherwise
   * (`--steer` on a pipe) every line that answers no question is a command.
   */
  readonly terminal: boolean;
  /** A command line was entered (its output is written before the line closes). */
  readonly onCommand?: (line: string) => void;
  /**
   * A line that was not taken (longer than MAX_STEERING_LINE_CHARS): the one line that says so,
   * to be shown where command answers are (default: written to `output`).
   */
  readonly onRefused?: (answer: string) => void;
  /** A command line opens (terminal only): the live tree gets out of the way; and it closes. */
  readonly onCommandOpen?: () => void;
  readonly onCommandClose?: () => void;
  /** Ctrl-C in raw mode, which no longer reaches the process as a signal. */
  readonly onInterrupt?: () => void;
}

interface Question {
  readonly prompt: string;
  readonly resolve: (line: string | undefined) => void;
}

/**
 * What the person at the terminal types, for whoever asks: one reader over stdin (readline on a
 * terminal, boundedLines.ts on a pipe; a line past MAX_STEERING_LINE_CHARS is refused), shared by the
 * approval questions (`ask`, one at a time, in order) and the steering command line. Why one: two
 * readers of one stdin would each get some of the lines.
 *
 * On a terminal, nothing typed is echoed while the live tree draws (readline's output is gated
 * shut): the first key typed while no question is open opens a command line (the tree is cleared
 * first, through `onCommandOpen`), and the line closes with Enter. A question asked meanwhile waits
 * for it. Reads nothing until `start` (steering) or the first question.
 */
export class TerminalInput {
  private lines: Interface | undefined;
  /** Without a terminal: the lines of the pipe, each kept only up to the cap (see boundedLines.ts). */
  private piped: BoundedLines | undefined;
  private readonly gate: GatedOutput;
  private readonly questions: Question[] = [];
  private open: Question | undefined;
  private commanding = false;
  private closed = false;

  constructor(private readonly options: TerminalInputOptions) {
    this.gate = new GatedOutput(options.output);
  }

  /** Starts reading (commands are taken from now on). */
  start(): void {
    if (this.lines || this.piped || this.closed) return;
    const { input, terminal } = this.options;
    if (!terminal) {
      // UTF-8 takes at most 4 bytes a character: no line within the cap is cut.
      this.piped = readBoundedLines(input, 4 * MAX_STEERING_LINE_CHARS, { line: this.onLine, overlong: this.onOverlong, end: () => this.close() });
      return;
    }
    // Before readline's own listener: the command line opens (and the tree clears) before the key is echoed.
    emitKeypressEvents(input);
    input.on('keypress', this.onKeypress);
    const lines = createInterface({ input, output: this.gate as unknown as NodeJS.WritableStream, terminal, historySize: 50 });
    lines.setPrompt('');
    lines.on('line', this.onLine);
    lines.on('close', () => this.close());
    lines.on('SIGINT', () => this.options.onInterrupt?.());
    this.lines = lines;
  }

  /** One line typed in answer to `prompt` (asked once the questions before it are answered); undefined once input has ended. */
  ask(prompt: string): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    this.start();
    return new Promise((resolve) => {
      this.questions.push({ prompt, resolve });
      this.next();
    });
  }

  /** Stops reading; questions still open get undefined. The terminal is left as it was found. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.options.input.off('keypress', this.onKeypress);
    const waiting = [...(this.open ? [this.open] : []), ...this.questions.splice(0)];
    this.open = undefined;
    this.gate.shut();
    this.lines?.close();
    this.piped?.close();
    for (const question of waiting) question.resolve(undefined);
    if (this.commanding) {
      this.commanding = false;
      this.options.onCommandClose?.();
    }
  }

  /** Opens the next question, unless one is open or a command line is being typed. */
  private next(): void {
    if (this.open || this.commanding || this.closed) return;
    const question = this.questions.shift();
    if (!question) return;
    this.open = question;
    this.gate.open();
    if (this.lines && this.options.terminal) {
      this.lines.setPrompt(question.prompt);
      this.lines.prompt();
    } else {
      this.options.output.write(question.prompt);
    }
  }

  private readonly onKeypress = (text: string | undefined, key: Key | undefined): void => {
    if (this.closed || this.open || this.commanding || !this.lines) return;
    // Only a key that types something opens a command line (Ctrl-C and the like go to readline).
    if (key?.ctrl || key?.meta || text === undefined || !/^[\p{L}\p{N}\p{P}\p{S} ]$/u.test(text)) return;
    this.commanding = true;
    this.options.onCommandOpen?.();
    this.gate.open();
    this.lines.setPrompt(COMMAND_PROMPT);
    this.lines.prompt(true);
  };

  /** A line past the cap: refused, whoever was to take it (a question stays open for the next line). */
  private readonly onOverlong = (): void => {
    if (this.options.onRefused) this.options.onRefused(TOO_LONG_ANSWER);
    else this.options.output.write(`${TOO_LONG_ANSWER}\n`);
  };

  private readonly onLine = (line: string): void => {
    // A terminal's readline keeps a line whole: one typed or pasted past the cap is refused here.
    if (line.length > MAX_STEERING_LINE_CHARS) {
      this.onOverlong();
      return;
    }
    const question = this.open;
    if (question) {
      this.open = undefined;
      this.quiet();
      question.resolve(line);
      this.next();
      return;
    }
    if (this.options.terminal && !this.commanding) return;
    try {
      this.options.onCommand?.(line);
    } finally {
      if (this.commanding) {
        this.commanding = false;
        this.quiet();
        this.options.onCommandClose?.();
      }
      this.next();
    }
  };

  /** Nothing typed is shown until the next question or command line. */
  private quiet(): void {
    this.gate.shut();
    this.lines?.setPrompt('');
  }
}

/**
 * readline's output on a terminal: what it echoes and redraws reaches the real output only while a
 * question or command line is open, so a key typed (or a window resized) while the live tree draws
 * writes nothing over it. Written by hand: readline needs only `write`, `columns` and events.
 */
class GatedOutput extends EventEmitter {
  private isOpen = false;

  constructor(private readonly out: NodeJS.WritableStream & { columns?: number }) {
    super();
  }

  get columns(): number {
    return this.out.columns ?? 80;
  }

  open(): void {
    this.isOpen = true;
  }

  shut(): void {
    this.isOpen = false;
  }

  write(data: string | Uint8Array): boolean {
    if (this.isOpen) this.out.write(data);
    return true;
  }
}
