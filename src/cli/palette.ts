/**
 * The CLI's colours. They mark meaning, not decoration: with colour off (NO_COLOR, CI, a pipe)
 * every line reads the same, only plainer.
 */
export interface Palette {
  readonly bold: (s: string) => string;
  readonly dim: (s: string) => string;
  readonly agent: (s: string) => string;
  /** By what the state means: working, waiting, reminded, done, or gone wrong. */
  readonly state: (state: string) => string;
  readonly tool: (s: string) => string;
  readonly inbox: (s: string) => string;
  readonly good: (s: string) => string;
  readonly bad: (s: string) => string;
}

export function palette(color: boolean): Palette {
  const sgr =
    (open: number, close: number) =>
    (s: string): string =>
      color ? `\u001b[${open}m${s}\u001b[${close}m` : s;
  const bold = sgr(1, 22);
  const dim = sgr(2, 22);
  const red = sgr(31, 39);
  const green = sgr(32, 39);
  const yellow = sgr(33, 39);
  const blue = sgr(34, 39);
  const magenta = sgr(35, 39);
  const cyan = sgr(36, 39);
  const stateColors: Readonly<Record<string, (s: string) => string>> = {
    starting: blue,
    streaming: blue,
    queued: dim,
    dispatchingBatch: yellow,
    waitingForAgents: dim,
    awaitingApproval: yellow,
    nudged: magenta,
    replied: green,
    readyForUser: green,
    finishedWithoutReply: red,
    capped: red,
    failed: red,
    cancelled: red,
  };
  return {
    bold,
    dim,
    agent: cyan,
    state: (state) => stateColors[state]?.(state) ?? state,
    tool: yellow,
    inbox: (s) => bold(green(s)),
    good: green,
    bad: red,
  };
}

/** Pads to a visible width: colour escapes take no columns. */
export function padVisible(text: string, width: number): string {
  const visible = text.replace(/\u001b\[[0-9;]*m/g, '').length;
  return text + ' '.repeat(Math.max(1, width - visible));
}

/** The start of `text` on one line (newlines shown as ⏎), quoted. */
export function excerpt(text: string, max: number): string {
  return `"${cut(
    text.replace(/\n+/g, (breaks) => ` ${'⏎'.repeat(breaks.length)} `),
    max,
  )}"`;
}

export function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
