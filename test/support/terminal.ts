import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAIN, onCleanup } from './cliHarness.js';

/**
 * `exarch` in a real terminal: tmux gives the command a pseudo-terminal and shows what a person
 * would see (`capture-pane`), escape codes applied. Without tmux a test file is skipped locally
 * with one line; under CI it must run (.ci/run installs tmux).
 */

const TMUX = ['/usr/bin/tmux', '/usr/local/bin/tmux', '/opt/homebrew/bin/tmux'].find((p) => existsSync(p));
const onCi = (process.env['CI'] ?? '') !== '' && process.env['CI'] !== '0' && process.env['CI']?.toLowerCase() !== 'false';

/** Whether `file`'s terminal tests run: one line on stderr when they are skipped, an error under CI. */
export function tmuxForFile(file: string): boolean {
  if (TMUX !== undefined) return true;
  if (onCi) throw new Error(`${file} needs tmux under CI (apt-get install tmux)`);
  process.stderr.write(`skipping ${file}: tmux not found (apt-get install tmux / brew install tmux)\n`);
  return false;
}

export const tmux = (...args: string[]): string => execFileSync(TMUX ?? 'tmux', args, { encoding: 'utf8' });
/** The whole pane as a person sees it, with its scrollback. */
const screen = (session: string): string => tmux('capture-pane', '-p', '-J', '-t', session, '-S', '-200');
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function waitFor(session: string, pattern: RegExp, what: string, ms = 20_000): Promise<string> {
  const until = Date.now() + ms;
  let shown = '';
  while (Date.now() < until) {
    shown = screen(session);
    if (pattern.test(shown)) return shown;
    await sleep(50);
  }
  throw new Error(`the terminal never showed ${what}; it showed:\n${shown}`);
}

/**
 * Starts `exarch ARGS` in a new 150×40 tmux session against `serverUrl`, in `cwd`; the script then
 * prints `EXIT=<code>`, runs `after` (shell lines) and stays open so the screen can be read. The
 * session is killed when the test ends. Returns its name.
 */
export function startInTerminal(name: string, cwd: string, serverUrl: string, args: string, after: readonly string[] = []): string {
  const session = `exarch-${name}-${process.pid}-${Date.now()}`;
  const script = join(cwd, 'run.sh');
  writeFileSync(
    script,
    [
      'unset CI NO_COLOR',
      `export ANTHROPIC_API_KEY=test-key ANTHROPIC_BASE_URL='${serverUrl}' TERM=xterm-256color`,
      `cd '${cwd}'`,
      `'${process.execPath}' '${MAIN}' ${args}`,
      'echo "EXIT=$?"',
      ...after,
      'sleep 60',
    ].join('\n'),
  );
  tmux('new-session', '-d', '-s', session, '-x', '150', '-y', '40', `sh '${script}'`);
  onCleanup(() => {
    try {
      tmux('kill-session', '-t', session);
    } catch {
      // Already gone.
    }
  });
  return session;
}
