import type { z } from 'zod';

/**
 * What is wrong with a value a schema refused, in one line a person can read: `usage.inputTokens
 * is missing`, `content[0].text is not a string`. zod's own message is a JSON dump of every issue
 * (and its wording, "expected string, received undefined", names JavaScript's internals), so only
 * the first issue is said, in exarch's words. Parse with `{ reportInput: true }`, so that a key
 * that is absent is told from one of the wrong type. The value itself is never quoted: it is what
 * came from outside, of any size.
 */
export function schemaProblem(error: z.core.$ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'it is not valid';
  const subject = pathText(issue.path) || 'it';
  switch (issue.code) {
    case 'invalid_type':
      // JSON has no undefined: an undefined input is a key that is not there. (Parsed without
      // reportInput, as the MCP SDK parses, there is no input to tell by: "is not" is true either way.)
      return 'input' in issue && issue.input === undefined ? `${subject} is missing` : `${subject} is not ${kindOf(issue.expected)}`;
    case 'invalid_value':
      return `${subject} is not ${oneOf(issue.values.map((value) => JSON.stringify(value) ?? String(value)))}`;
    case 'invalid_union':
      return 'options' in issue && Array.isArray(issue.options)
        ? `${subject} is not ${oneOf(issue.options.map((value) => JSON.stringify(value) ?? String(value)))}`
        : `${subject} has none of the shapes allowed`;
    case 'too_small':
    case 'too_big':
      return `${subject} is out of range`;
    case 'unrecognized_keys':
      return `${subject} has ${issue.keys.length === 1 ? 'a field' : 'fields'} it may not: ${oneOf(issue.keys.map((key) => JSON.stringify(key.slice(0, 60)))).replace(/^one of /, '')}`;
    default:
      return `${subject} is not valid`;
  }
}

/** `content[0].text` for ['content', 0, 'text']. */
function pathText(path: readonly PropertyKey[]): string {
  let text = '';
  for (const key of path) text += typeof key === 'number' ? `[${key}]` : text === '' ? String(key) : `.${String(key)}`;
  return text;
}

function kindOf(expected: string): string {
  switch (expected) {
    case 'object':
    case 'array':
      return `an ${expected}`;
    case 'int':
      return 'an integer';
    case 'string':
    case 'number':
    case 'boolean':
      return `a ${expected}`;
    default:
      return `of type ${expected}`;
  }
}

/** `"a"`, `"a" or "b"`, `one of "a", "b", "c"`: at most eight named. */
function oneOf(values: readonly string[]): string {
  if (values.length === 1) return values[0] ?? '';
  if (values.length === 2) return `${values[0]} or ${values[1]}`;
  const named = values.slice(0, 8).join(', ');
  return `one of ${named}${values.length > 8 ? ', …' : ''}`;
}
