import type { z } from 'zod';
import type { Tool } from '../tools/defineTool.js';
import { AGENT_NAME } from '../tools/protocolTools.js';
import type { AgentIdentity } from '../engine/types.js';

/**
 * A declared kind of sub-agent (`SessionOptions.agents`): the model starts one with the `agent`
 * tool's `type`, and it runs with this profile's prompt, tools, model, step cap and reply schema.
 * What is not set is the run's own.
 */
export interface AgentProfile {
  /** What this agent is for: listed to the model beside its name in the `agent` tool. */
  readonly description: string;
  /** Its system prompt, instead of the run's (a string, or one per agent as `SessionOptions.system`). */
  readonly system?: string | ((agent: AgentIdentity, canSpawn: boolean) => string);
  /**
   * The tools it may call, by name or as the run's own `Tool` objects: a subset of the run's `tools`
   * (a profile cannot grant a tool the run does not offer). Default: all of the run's tools.
   */
  readonly tools?: readonly (string | Tool)[];
  /** The model its requests ask for (`ModelRequest.model`); default: the provider's. */
  readonly model?: string;
  /** Its model requests per turn (default: the run's `maxSteps`). */
  readonly maxSteps?: number;
  /**
   * A zod object schema for its reply: the `reply` tool's input becomes this schema, a reply that
   * does not match is refused naming the fields, and the parent's `AgentResult.value` is the parsed value.
   */
  readonly reply?: z.ZodType;
}

/** Declared agents by type name. */
export type AgentProfiles = Readonly<Record<string, AgentProfile>>;

/** A profile checked against the run: its tools resolved to the run's `Tool` objects. */
export interface CheckedProfile {
  readonly name: string;
  readonly description: string;
  readonly profile: AgentProfile;
  /** Undefined: the run's tools. */
  readonly tools: readonly Tool[] | undefined;
}

/**
 * Checks declared agents against the run's tools; a bad declaration throws one line naming the
 * profile and the field. Returns them in declaration order.
 */
export function checkProfiles(agents: unknown, runTools: readonly Tool[]): CheckedProfile[] {
  if (agents === undefined) return [];
  if (typeof agents !== 'object' || agents === null || Array.isArray(agents)) {
    throw new TypeError('exarch: `agents` must be an object of agent profiles by type name');
  }
  const byName = new Map(runTools.map((tool) => [tool.name, tool]));
  const checked: CheckedProfile[] = [];
  for (const [name, raw] of Object.entries(agents as Record<string, unknown>)) {
    const where = `agents.${name}`;
    if (!AGENT_NAME.test(name)) throw new TypeError(`exarch: agent type ${JSON.stringify(name)} must be 1–64 characters of A-Za-z0-9_-`);
    if (typeof raw !== 'object' || raw === null) throw new TypeError(`exarch: ${where} must be an object with at least a description`);
    const profile = raw as AgentProfile;
    if (typeof profile.description !== 'string' || profile.description.trim() === '') {
      throw new TypeError(`exarch: ${where}.description must be a non-empty string`);
    }
    if (profile.system !== undefined && typeof profile.system !== 'string' && typeof profile.system !== 'function') {
      throw new TypeError(`exarch: ${where}.system must be a string or a function`);
    }
    if (profile.model !== undefined && (typeof profile.model !== 'string' || profile.model.trim() === '')) {
      throw new TypeError(`exarch: ${where}.model must be a non-empty string`);
    }
    if (profile.reply !== undefined && typeof (profile.reply as { safeParse?: unknown }).safeParse !== 'function') {
      throw new TypeError(`exarch: ${where}.reply must be a zod schema`);
    }
    checked.push({
      name,
      description: profile.description.trim(),
      profile,
      tools: profile.tools === undefined ? undefined : toolsOf(where, profile.tools, byName),
    });
  }
  return checked;
}

function toolsOf(where: string, listed: unknown, runTools: ReadonlyMap<string, Tool>): Tool[] {
  if (!Array.isArray(listed)) throw new TypeError(`exarch: ${where}.tools must be an array of tool names or tools`);
  const tools: Tool[] = [];
  for (const entry of listed as unknown[]) {
    const name = typeof entry === 'string' ? entry : (entry as Tool | null)?.name;
    const tool = typeof name === 'string' ? runTools.get(name) : undefined;
    if (!tool || (typeof entry !== 'string' && entry !== tool)) {
      const known = [...runTools.keys()];
      throw new TypeError(
        `exarch: ${where}.tools lists ${typeof name === 'string' ? `'${name}'` : String(entry)}, which is not one of the run's tools (${known.length > 0 ? known.join(', ') : 'it has none'})`,
      );
    }
    if (!tools.includes(tool)) tools.push(tool);
  }
  return tools;
}
