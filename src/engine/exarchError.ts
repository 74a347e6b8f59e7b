/**
 * The base of every error exarch throws on purpose. `kind` says which failure it is, as a
 * string-literal union per class (one literal for a class with one cause), so a host can branch on
 * it exhaustively; `message` is one line for a person; `name` is the class's own name — a subclass
 * a host derives gets its own too, without repeating it; `cause` is the error underneath, when one
 * was given. Each class adds its own context (`file`, `runId`, `server`, `problems`, …).
 *
 * @example
 * ```ts
 * import { MemoryRunStore, resumeRun, RunError } from 'exarch';
 * import { scriptedProvider } from 'exarch/testing';
 *
 * try {
 *   await resumeRun('no-such-run', { provider: scriptedProvider({ agents: {} }) }, { store: new MemoryRunStore() });
 * } catch (error) {
 *   if (!(error instanceof RunError)) throw error;
 *   switch (error.kind) {
 *     case 'unknown-run':
 *       console.log(`no run ${error.runId}`); // no run no-such-run
 *       break;
 *     case 'held':
 *     case 'wrong-directory':
 *     case 'tools-differ':
 *     case 'agents-differ':
 *     case 'not-waiting':
 *     case 'spread':
 *     case 'inconsistent':
 *       console.log(error.message);
 *       break;
 *     default: {
 *       // A kind added in a later exarch fails to compile here.
 *       const unhandled: never = error.kind;
 *       throw new Error(`unexpected ${String(unhandled)}`);
 *     }
 *   }
 * }
 * ```
 */
export abstract class ExarchError<Kind extends string> extends Error {
  /** Which failure this is: one of the class's literals. */
  readonly kind: Kind;

  constructor(kind: Kind, message: string, options?: ErrorOptions) {
    super(message, options);
    // The class actually constructed, so no subclass repeats its own name.
    this.name = new.target.name;
    this.kind = kind;
  }
}
