import type { z } from 'zod';
import type { AgentIdentity, ToolSpec } from '../engine/types.js';

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What a tool's `run` gets besides its input. */
export interface ToolContext {
  readonly agent: AgentIdentity;
  readonly toolUseId: string;
  /** Aborted when the call times out or the session is cancelled. */
  readonly signal: AbortSignal;
}

/** A validated call, ready to run. */
export type PreparedRun = (context: ToolContext) => Promise<unknown>;

export type Validation<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** A tool the session can advertise and run. Build one with `defineTool`. */
export interface Tool {
  readonly name: string;
  readonly spec: ToolSpec;
  /** Per-call time limit; the session default applies when absent. */
  readonly timeoutMs: number | undefined;
  /**
   * Running the same call twice has the same effect as running it once. A durable run that
   * crashed while such a call ran runs it again on resume; any other call is answered with an
   * error saying that its effect is unknown.
   */
  readonly idempotent: boolean;
  /**
   * The call changes nothing outside the process (it reads). In a durable run such a call may
   * start before the response that asked for it is stored: a crash that loses the response loses
   * no effect with it (the model is asked again). If the response survived, the call runs again
   * on resume when it is idempotent, as a read-only tool is unless it says otherwise.
   * A batch of such calls then costs one journal commit rather than two.
   */
  readonly readOnly: boolean;
  /** Validates raw model input; on success returns the call to run. */
  prepare(input: unknown): Validation<PreparedRun>;
}

export interface ToolDefinition<S extends z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly input: S;
  readonly run: (input: z.output<S>, context: ToolContext) => unknown;
  readonly timeoutMs?: number;
  /** See `Tool.idempotent` (default false: a call in flight at a crash is not run again). */
  readonly idempotent?: boolean;
  /** See `Tool.readOnly` (default false). A read-only tool is idempotent unless it says otherwise. */
  readonly readOnly?: boolean;
}

/**
 * Defines a tool: the zod schema validates the model's input and becomes the JSON Schema the
 * model is shown; `run`'s return value is rendered for the model by the shared renderer.
 */
export function defineTool<S extends z.ZodType>(definition: ToolDefinition<S>): Tool {
  const validate = inputValidator(definition.name, definition.input);
  return {
    name: definition.name,
    spec: toolSpec(definition.name, definition.description, definition.input),
    timeoutMs: definition.timeoutMs,
    idempotent: definition.idempotent ?? definition.readOnly ?? false,
    readOnly: definition.readOnly ?? false,
    prepare(input) {
      const parsed = validate(input);
      if (!parsed.ok) return parsed;
      return { ok: true, value: async (context) => definition.run(parsed.value, context) };
    },
  };
}

export function toolSpec(name: string, description: string, schema: z.ZodType): ToolSpec {
  if (!TOOL_NAME.test(name)) throw new Error(`tool name ${JSON.stringify(name)} must be 1–64 characters of A-Za-z0-9_-`);
  // The schema's own method (zod ≥ 4.2), not `z.toJSONSchema`: exarch's main entry does not load
  // zod (some 90 ms of a cold start, most of it zod's 60-odd locale modules), a host with a schema has.
  if (typeof (schema as { toJSONSchema?: unknown }).toJSONSchema !== 'function') {
    throw new TypeError(`tool '${name}': its input schema has no toJSONSchema(): exarch needs zod 4.2 or later (see its peer dependency)`);
  }
  const { $schema: _ignored, ...inputSchema } = schema.toJSONSchema({ io: 'input' }) as Record<string, unknown>;
  if (inputSchema['type'] !== 'object') throw new Error(`tool '${name}': the input schema must be a zod object`);
  return { name, description, input_schema: inputSchema };
}

/** Validates with zod; the error names each offending field. */
export function inputValidator<S extends z.ZodType>(toolName: string, schema: S): (input: unknown) => Validation<z.output<S>> {
  return (input) => {
    const parsed = schema.safeParse(input);
    if (parsed.success) return { ok: true, value: parsed.data };
    return { ok: false, error: invalidInput(toolName, parsed.error.issues) };
  };
}

/** Where in a tool's input something is wrong, and what. */
export interface InputIssue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** The error a tool's invalid input is answered with: each offending field and what is wrong with it. */
export function invalidInput(toolName: string, issues: readonly InputIssue[]): string {
  const fields = issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.map(String).join('.') : '(input)';
    return `${field}: ${issue.message}`;
  });
  return `invalid input for tool '${toolName}': ${fields.join('; ')}`;
}
