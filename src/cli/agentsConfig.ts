import { extname, resolve } from 'node:path';
import { z } from 'zod';
import { checkProfiles, type AgentProfile, type AgentProfiles } from '../session/agentProfiles.js';
import { ExarchError } from '../engine/exarchError.js';
import { fileErrorOf } from '../engine/fs/fileError.js';
import { readRegular } from '../engine/fs/regularFile.js';
import { describeError } from '../engine/model/errors.js';
import type { Tool } from '../tools/defineTool.js';
import { schemaProblem } from '../engine/schemaProblem.js';

/** The file `exarch run` reads declared agents from when `--agents` is not given, if it exists. */
const DEFAULT_CONFIG_FILE = 'exarch.config.json';

/** The largest config read (1 MiB, far more than any set of agents needs); a larger file is refused by its size, unread. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * Why a config file cannot be used: `unsupported`: not a JSON config, or a reply schema this zod
 * cannot read; `unreadable`; `not-json`; `invalid`: its content is not a set of agents this run
 * can have (a field, a reply schema, a tool it does not allow).
 */
export type AgentsConfigErrorKind = 'unsupported' | 'unreadable' | 'not-json' | 'invalid';

/** A config file that cannot be used: one line naming the file and what is wrong (exit 1). */
export class AgentsConfigError extends ExarchError<AgentsConfigErrorKind> {
  constructor(
    kind: AgentsConfigErrorKind,
    /** The file as the user named it. */
    readonly file: string,
    message: string,
  ) {
    super(kind, message);
  }
}

/**
 * The JSON form of a profile (`SessionOptions.agents`): tools by name, and the reply schema as a
 * JSON Schema object, which becomes a zod schema (`z.fromJSONSchema`).
 */
const profileJson = z.strictObject({
  description: z.string().trim().min(1),
  system: z.string().min(1).optional(),
  tools: z.array(z.string()).optional(),
  model: z.string().trim().min(1).optional(),
  maxSteps: z.int().min(1).optional(),
  reply: z.record(z.string(), z.unknown()).optional(),
});

const configJson = z.strictObject({
  agents: z.record(z.string(), profileJson),
});

type AgentsConfigJson = z.output<typeof configJson>;

/** Declared agents for the CLI, and the JSON a durable run records to rebuild them on resume. */
export interface LoadedAgents {
  readonly agents: AgentProfiles;
  readonly json: AgentsConfigJson;
}

/**
 * Reads `--agents FILE`, or `exarch.config.json` in `cwd` when there is one: the config's JSON,
 * checked but for the tools its profiles name (those are checked against the run's tools once its
 * MCP servers are connected: `agentsFromJson`). Undefined when neither. Every problem is one
 * `AgentsConfigError` line naming the file (a missing file, a TypeScript config, bad JSON, an
 * unknown field, a reply schema that is no object schema). The default file lies in the
 * workspace, where an agent may have made it a FIFO, a link to a device or a huge file: anything
 * but a regular file is refused without waiting on it, and one over 1 MiB by its size.
 */
export function readAgentsConfig(file: string | undefined, cwd: string): AgentsConfigJson | undefined {
  const path = resolve(cwd, file ?? DEFAULT_CONFIG_FILE);
  const shown = agentsSource(file);
  if (['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'].includes(extname(path))) {
    throw new AgentsConfigError(
      'unsupported',
      shown,
      `${shown}: only a JSON config is supported (a .ts or .js config is not); write the agents as JSON, e.g. ${DEFAULT_CONFIG_FILE}`,
    );
  }
  let text: string;
  try {
    text = readRegular(path, MAX_CONFIG_BYTES, { what: '' }).toString('utf8');
  } catch (error) {
    const fault = fileErrorOf(error, path, { what: '', writing: false });
    if (file === undefined && fault.kind === 'missing') return undefined;
    throw new AgentsConfigError('unreadable', shown, `cannot read ${shown}: ${fault.reason}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new AgentsConfigError('not-json', shown, `${shown} is not valid JSON${whereJsonBreaks(text, error)}`);
  }
  return parseConfig(raw, shown).json;
}

/**
 * Where a text stops being JSON, for a person editing it: `: it ends too soon`, `: at line 3,
 * column 14`. JSON.parse says it in V8's words (`Expected property name or '}' in JSON at position
 * 12`); only the position is taken from them, and when it is not there, nothing is said.
 */
function whereJsonBreaks(text: string, error: unknown): string {
  const message = describeError(error);
  if (/end of JSON input/i.test(message)) return ': it ends too soon';
  const position = /at position (\d+)/.exec(message)?.[1];
  if (position === undefined) return '';
  const before = text.slice(0, Number(position)).split('\n');
  return `: at line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`;
}

/** How messages name the config `--agents` gave (or the default file). */
export function agentsSource(file: string | undefined): string {
  return file ?? DEFAULT_CONFIG_FILE;
}

/**
 * Declared agents from a config's JSON (a file's, or the one a durable run recorded). The file may
 * be one an agent wrote in an earlier run (`exarch.config.json` is read from the working directory
 * by default), so it can narrow the run and never widen it: a profile's tools are some of the run's
 * (`checkProfiles`), its step cap at most the run's `maxSteps`, and it has no field for anything
 * else a run is given (shell, network, MCP servers, approvals, budget).
 */
export function agentsFromJson(raw: unknown, shown: string, tools: readonly Tool[], maxSteps: number): LoadedAgents {
  const { agents, json } = parseConfig(raw, shown);
  for (const [name, profile] of Object.entries(json.agents)) {
    if (profile.maxSteps !== undefined && profile.maxSteps > maxSteps) {
      throw new AgentsConfigError(
        'invalid',
        shown,
        `${shown}: agents.${name}.maxSteps is ${profile.maxSteps}, above the run's step cap (${maxSteps}): a declared agent cannot raise it; --max-steps ${profile.maxSteps} does`,
      );
    }
  }
  try {
    checkProfiles(agents, tools);
  } catch (error) {
    // The library's line names the field; here the file is named too.
    const line = describeError(error).replace(/^exarch: /, '');
    throw new AgentsConfigError(
      'invalid',
      shown,
      `${shown}: ${line}${line.includes("not one of the run's tools") ? '; --allow-write, --allow-shell and --mcp offer more' : ''}`,
    );
  }
  return { agents, json };
}

/** The profiles of a config's JSON, their reply schemas made zod schemas; their tools are not checked. */
function parseConfig(raw: unknown, shown: string): LoadedAgents {
  const parsed = configJson.safeParse(raw, { reportInput: true });
  if (!parsed.success) {
    // In exarch's words (zod's say "received undefined" of a field that is missing).
    throw new AgentsConfigError('invalid', shown, `${shown}: ${schemaProblem(parsed.error)} (expected { "agents": { "NAME": { "description": … } } })`);
  }
  const agents: Record<string, AgentProfile> = {};
  for (const [name, profile] of Object.entries(parsed.data.agents)) {
    const { reply, ...rest } = profile;
    let schema: z.ZodType | undefined;
    if (reply !== undefined) {
      if (reply['type'] !== 'object') throw new AgentsConfigError('invalid', shown, `${shown}: agents.${name}.reply must be a JSON Schema of type "object"`);
      // A peer dependency: an app may have a zod 4 from before z.fromJSONSchema.
      if (typeof z.fromJSONSchema !== 'function')
        throw new AgentsConfigError('unsupported', shown, `${shown}: agents.${name}.reply needs a newer zod (one with z.fromJSONSchema)`);
      try {
        schema = z.fromJSONSchema(reply as Parameters<typeof z.fromJSONSchema>[0]);
      } catch (error) {
        throw new AgentsConfigError('invalid', shown, `${shown}: agents.${name}.reply is not a JSON Schema exarch can use: ${describeError(error)}`);
      }
    }
    agents[name] = { ...rest, ...(schema === undefined ? {} : { reply: schema }) };
  }
  return { agents, json: parsed.data };
}
