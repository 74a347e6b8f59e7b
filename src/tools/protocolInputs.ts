import type { InputIssue } from './defineTool.js';

/**
 * The checks of the protocol tools' inputs (`agent`, `cancel_agent`, `wait_for_agents`, `reply`),
 * by hand rather than with zod: every session offers these tools, and zod is some 90 ms of a cold
 * `import('exarch')` (most of it its 60-odd locale modules, which every zod entry loads), a cost
 * a host that defines no tool of its own would pay for four small objects. They say what zod said
 * of the schemas they replaced, word for word (`test/property/protocolInputs.property.test.ts`
 * holds those schemas as the oracle), since the model reads these messages and recordings hold them.
 */

/** 1–64 characters of A-Za-z0-9_-: an agent's name. */
export const AGENT_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const AGENT_NAME_RULE = 'must be 1–64 characters of A-Za-z0-9_-';

/** What is wrong with an input, issue by issue, in the order of the schema's fields; empty when nothing is. */
export type Issues = InputIssue[];

/** The type name zod's messages use for a value (`util.parsedType`, then the locale's `NaN`/`Infinity`). */
function received(value: unknown): string {
  if (typeof value === 'number') return Number.isFinite(value) ? 'number' : Number.isNaN(value) ? 'NaN' : String(value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object') {
    const proto: unknown = Object.getPrototypeOf(value);
    const ctor = (value as { constructor?: unknown }).constructor;
    if (proto !== Object.prototype && typeof ctor === 'function' && ctor.name !== '') return ctor.name;
  }
  return typeof value;
}

function wrongType(path: readonly PropertyKey[], expected: string, value: unknown): InputIssue {
  return { path, message: `Invalid input: expected ${expected}, received ${received(value)}` };
}

/** A plain object, as `z.object` takes one. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `input` must be an object: the one issue when it is not. */
export function objectIssue(input: unknown, path: readonly PropertyKey[] = []): InputIssue | undefined {
  return isRecord(input) ? undefined : wrongType(path, 'object', input);
}

/** A name (`z.string().regex(AGENT_NAME, …)`); issues go to `issues`. */
export function checkName(value: unknown, path: readonly PropertyKey[], issues: Issues): void {
  if (typeof value !== 'string') issues.push(wrongType(path, 'string', value));
  else if (!AGENT_NAME.test(value)) issues.push({ path, message: AGENT_NAME_RULE });
}

/** A task (`z.string().min(1)`). */
export function checkTask(value: unknown, path: readonly PropertyKey[], issues: Issues): void {
  if (typeof value !== 'string') issues.push(wrongType(path, 'string', value));
  else if (value.length < 1) issues.push({ path, message: 'Too small: expected string to have >=1 characters' });
}

/** A finite number (`z.number()`); false, with its issue, when it is not one. */
function checkNumber(value: unknown, path: readonly PropertyKey[], issues: Issues): value is number {
  if (typeof value === 'number' && Number.isFinite(value)) return true;
  issues.push(wrongType(path, 'number', value));
  return false;
}

/** `budget.tokens`: `z.number().int().positive()`. */
function checkTokens(value: unknown, path: readonly PropertyKey[], issues: Issues): void {
  if (!checkNumber(value, path, issues)) return;
  if (!Number.isInteger(value)) {
    issues.push(wrongType(path, 'int', value));
    return;
  }
  if (value > Number.MAX_SAFE_INTEGER) issues.push({ path, message: `Too big: expected int to be <=${Number.MAX_SAFE_INTEGER}` });
  else if (value < Number.MIN_SAFE_INTEGER) issues.push({ path, message: `Too small: expected int to be >=${Number.MIN_SAFE_INTEGER}` });
  if (value <= 0) issues.push({ path, message: 'Too small: expected number to be >0' });
}

/** `budget.cost`: `z.number().positive()`. */
function checkCost(value: unknown, path: readonly PropertyKey[], issues: Issues): void {
  if (checkNumber(value, path, issues) && value <= 0) issues.push({ path, message: 'Too small: expected number to be >0' });
}

/** An `agent` call's budget, as it was checked: a strict object of `tokens` and `cost`, at least one of them. */
export interface BudgetInput {
  readonly tokens?: number | undefined;
  readonly cost?: number | undefined;
}

const BUDGET_KEYS: ReadonlySet<string> = new Set(['tokens', 'cost']);

/** `budget` (present): its issues go to `issues`; its value when it has none. */
export function checkBudget(value: unknown, issues: Issues): BudgetInput | undefined {
  const path = ['budget'];
  const notObject = objectIssue(value, path);
  if (notObject !== undefined || !isRecord(value)) {
    if (notObject !== undefined) issues.push(notObject);
    return undefined;
  }
  const before = issues.length;
  if (value['tokens'] !== undefined) checkTokens(value['tokens'], ['budget', 'tokens'], issues);
  if (value['cost'] !== undefined) checkCost(value['cost'], ['budget', 'cost'], issues);
  const unknown = Object.keys(value).filter((key) => !BUDGET_KEYS.has(key));
  if (unknown.length > 0) {
    issues.push({ path, message: `Unrecognized key${unknown.length > 1 ? 's' : ''}: ${unknown.map((key) => `"${key}"`).join(', ')}` });
  }
  if (value['tokens'] === undefined && value['cost'] === undefined) issues.push({ path, message: 'give tokens, cost or both' });
  if (issues.length > before) return undefined;
  return {
    ...('tokens' in value ? { tokens: value['tokens'] as number | undefined } : {}),
    ...('cost' in value ? { cost: value['cost'] as number | undefined } : {}),
  };
}

/** An optional string of `options` (`z.enum(options).optional()`); `message` says what is wrong with another value. */
export function checkOption(
  value: unknown,
  options: readonly string[],
  path: readonly PropertyKey[],
  issues: Issues,
  message: (value: unknown) => string = () => `Invalid option: expected one of ${options.map((o) => `"${o}"`).join('|')}`,
): void {
  if (value !== undefined && !(typeof value === 'string' && options.includes(value))) issues.push({ path, message: message(value) });
}
