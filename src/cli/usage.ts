import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MODEL } from '../providers/defaultModel.js';

/** The commands exarch knows, in the order its help lists them. */
const COMMANDS = ['run', 'worker', 'resume', 'approve', 'deny', 'runs', 'demo', 'view'] as const;

/** A command's name, as typed after `exarch`. */
export type CommandName = (typeof COMMANDS)[number];

/** Whether `word` names a command (`exarch WORD …`). */
export function isCommand(word: string | undefined): word is CommandName {
  return (COMMANDS as readonly (string | undefined)[]).includes(word);
}

const RUN = `  exarch run [options] "<task>"   a root agent works on the task with Claude; sub-agents report
                                  back through reply. stdout: the final answer; stderr: progress
      --model ID          model (default: $EXARCH_MODEL, else ${DEFAULT_MODEL})
      --max-steps N       model requests per turn before an agent is capped (default 50)
      --max-depth N       how deep sub-agents may nest (default 2: root → child → grandchild)
      --reply-cap CHARS   longest reply a sub-agent hands up (default 16000)
      --max-retry-wait S  longest wait a rate-limited or overloaded API may ask for before a
                          request is retried (default 60, at most 2147483); longer, and the
                          request fails
      --wake each|all     an agent that ended its turn while sub-agents run is woken by each
                          result (each, the default) or once, when all have reported (all)
      --log-dir DIR       where each agent's JSONL log goes (default .exarch/runs/<time>/)
      --agents FILE       declared agents (JSON; default ./exarch.config.json when it exists):
                          { "agents": { "NAME": { "description", "system", "tools", "model",
                          "maxSteps", "reply": JSON Schema } } }; the model starts one by type
      --allow-write       let agents write files in the working directory
      --allow-shell       let agents run shell commands, in a bubblewrap sandbox: the working
                          directory writable, the rest read-only, no network (Linux)
      --allow-shell=unsandboxed
                          the same without a sandbox: commands get your full access
      --allow-network     let sandboxed shell commands reach the network
      --allow-git-hooks   let agents change git's hooks and config (.git/hooks, .git/config,
                          core.hooksPath), which git runs outside any sandbox; without it they
                          are read-only in the sandbox and write_file refuses anything in .git
      --shell-limits processes=N,memory=SIZE,file-size=SIZE,cpu=SECONDS,open-files=N
                          limits of each sandboxed command (default processes=1024,
                          memory=8G, file-size=4G, cpu=600, open-files=8192; any may be
                          unlimited); memory, cpu and open files count per process
      --shell-user NAME|UID
                          run as root, exarch runs sandboxed commands as another user: by
                          default the working directory's owner, or nobody when that is
                          root; --shell-user root runs them as root (said on stderr)
      --mcp "CMD ARGS"    offer the tools of an MCP server to every agent, as mcp__<server>__<tool>:
                          a command line (quoted as in a shell) runs the server over stdio; an
                          http(s):// URL reaches a streamable HTTP server (\${NAME} in it is read
                          from the environment: a token off the command line). Repeatable. A
                          server that does not start stops the run; one that crashes or hangs
                          later gives the agent an error result; servers are closed when the run
                          ends
      --trace FILE        record the run as a JSONL trace (view it with exarch view)
      --otel              send the run as OpenTelemetry spans (GenAI conventions: invoke_agent,
                          chat, execute_tool) over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT;
                          message content too when
                          OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
      --record FILE       keep every model exchange (the request as sent, the response stream)
                          in FILE, for --replay; no key and no *_KEY/*_TOKEN/*_SECRET value in it
      --replay FILE       answer from a recording instead of Claude: offline, no key, at full
                          speed, the same tool calls and answer; give the same task and options.
                          A request that differs from the recording stops the run: exit 1 and
                          one line naming the first differing field
      --inspect           stream every agent to the live Stately inspector (--inspect-port N,
                          default 8080 on 127.0.0.1)
      --ui                serve the turn-flow viewer live on 127.0.0.1 (any free port, or
                          --ui-port N; the address is printed on stderr): the page follows the
                          run as it goes. On a terminal it is served on after the answer until
                          Ctrl-C; otherwise the server closes when the run ends
      --store FILE        the run store (default .exarch/exarch.db under the working directory);
                          the run's id is printed first, and exarch resume takes it up again
      --db URL            keep the run in PostgreSQL (postgres://user@host:port/database)
                          instead of the file, and queue it for the workers (exarch worker);
                          this process follows it with the same progress and answer.
                          Default: $EXARCH_DB_URL, for every command that takes --db
      --no-store          run without recording it (it cannot be resumed)
      --approve TOOLS|all calls of these tools (comma-separated), by any agent, wait for a
                          person's approval: asked inline on a terminal, one at a time
                          (with --db: once the workers have done all they can without them)
      --no-wait           never ask: once only approvals are left, stop as waiting (exit 4)
                          and list them (also what happens without a terminal)
      --steer             read steering commands from stdin, one a line, even when it is not
                          a terminal (on a terminal they are read anyway: type a command while
                          the tree draws): /cancel PATH cancels a sub-agent and its subtree,
                          /msg PATH TEXT gives a running agent a message, /help lists them
                          and the agents running (PATH: root/lead/scribe)
      --max-tokens N      a budget for the whole tree: no request starts once its responses
      --max-cost USD      have used N tokens (or cost USD at list prices); running sub-agents
                          are cancelled and the root answers in one final turn (else exit 3)
      --detach            with --db: print the run id once it is queued and return
      --spread            with --db: each sub-agent a job of its own, spread over the workers;
                          a parent waiting for its sub-agents or a person holds no worker
                          slot (not with --max-tokens or --max-cost: such a run runs whole on
                          one worker)`;

const WORKER = `  exarch worker --db URL [--concurrency N] [--drain-timeout S] [--job-expiry S] [--otel]
                                  take runs queued with run --db and run them here, N at a time
                                  (default 1; of a --spread run, N sessions at a time: its
                                  sub-agents are jobs of their own), with the options each was started with (its --mcp
                                  servers started here); with no one to ask, a run whose calls
                                  wait for approval stops waiting (its follower on a terminal asks,
                                  or exarch approve --db answers them). SIGTERM drains: runs get S seconds (default 30) to
                                  finish, the rest go back to the queue; a job not finished within
                                  --job-expiry seconds (default 900) is offered to another worker;
                                  --otel sends the spans of what it runs, as run --otel does`;

const RESUME = `  exarch resume RUN_ID [--store FILE | --db URL] [--trace FILE] [--no-wait] [--ui] [--steer]
                                  take up a run that was killed, crashed, interrupted or left
                                  waiting, with the options it was started with; ends as run would.
                                  A run whose stored options do not match the signature exarch
                                  recorded them with (changed, or never signed) is refused`;

/** approve and deny: one section, as they are two answers to the same question. */
const ANSWER = `  exarch approve RUN_ID CALL_ID [--always] [--store FILE | --db URL]
  exarch deny RUN_ID CALL_ID ["reason"] [--store FILE | --db URL]
                                  record an answer to a call a waiting run asks about (--always:
                                  approve that tool for the rest of the run); resume runs it.
                                  With --db, once no call waits any more, a worker continues it`;

const RUNS = `  exarch runs [--store FILE | --db URL]
                                  list the recorded runs: id, start, status, agents, requests,
                                  estimated cost, task`;

const DEMO = `  exarch demo [--speed N] [--trace FILE] [--inspect] [--ui]
                                  offline demo, no API key: a sub-agent returns its report through
                                  the reply tool while the turn flow of every agent prints live;
                                  writes a trace (default .exarch/demo/trace.jsonl) and its viewer`;

const VIEW = `  exarch view TRACE|RUN_ID [--out FILE.html] [--store FILE | --db URL]
                                  write the turn-flow viewer for a trace or a recorded run: one
                                  self-contained HTML file (default: next to the trace, .html
                                  instead of .jsonl; for a run, .exarch/view/RUN_ID.html), the
                                  page run --ui serves live, once the run has ended`;

const HELP = `  exarch help [COMMAND]           show this help, or one command's (also exarch COMMAND --help)
  exarch --version                print the version`;

const ENVIRONMENT = `Environment: ANTHROPIC_API_KEY (required by run, not by --replay), ANTHROPIC_BASE_URL, EXARCH_MODEL,
EXARCH_STALL_TIMEOUT_MS (default 120000), EXARCH_DEBUG (1: an internal error in full), EXARCH_STATE_DIR
(where the key that signs run records is kept; default $XDG_STATE_HOME/exarch, else
~/.local/state/exarch); EXARCH_DB_URL (the default --db), PGPASSWORD, PGPASSFILE and libpq's other
PG* variables (the database's password and more, off the command line); with --otel:
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_EXPORTER_OTLP_HEADERS (the
collector's credentials), OTEL_EXPORTER_OTLP_TIMEOUT (default 10000), OTEL_SERVICE_NAME. A URL is
shown with its password and secret parameters masked.
Exit codes: 0 done, 1 fatal, 2 bad usage, 3 root capped, 4 waiting for approval (resumable),
5 stopped: a file the run writes could not be written (disk full, file-size limit, read-only; resumable),
130 interrupted (resumable).`;

const SECTIONS: Readonly<Record<CommandName, string>> = {
  run: RUN,
  worker: WORKER,
  resume: RESUME,
  approve: ANSWER,
  deny: ANSWER,
  runs: RUNS,
  demo: DEMO,
  view: VIEW,
};

/** The commands that start agents, whose help also lists the environment they read and the exit codes. */
const AGENT_COMMANDS: ReadonlySet<CommandName> = new Set(['run', 'worker', 'resume']);

/** The whole help: every command, the environment and the exit codes (`exarch --help`, `exarch help`). */
export const USAGE = `Usage:
${[RUN, WORKER, RESUME, ANSWER, RUNS, DEMO, VIEW, HELP].join('\n')}

${ENVIRONMENT}`;

/** One command's help (`exarch help run`, `exarch run --help`): its section, and where the rest is. */
export function commandHelp(command: CommandName): string {
  const rest = AGENT_COMMANDS.has(command) ? `\n\n${ENVIRONMENT}` : '';
  return `Usage:\n${SECTIONS[command]}${rest}\n\nrun 'exarch --help' for every command, the environment and the exit codes`;
}

/** The version in package.json: two levels up from src/cli/ in the sources, three from dist/src/cli/. */
export function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      const pkg: unknown = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      if (typeof pkg === 'object' && pkg !== null && 'name' in pkg && pkg.name === 'exarch' && 'version' in pkg) return String(pkg.version);
    } catch {
      // not here: look one level up
    }
    dir = dirname(dir);
  }
  return 'unknown';
}
