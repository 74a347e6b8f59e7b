import ts from 'typescript';

/**
 * What a documented block says it prints. The convention (docs/testing.md): a `console.log(…)`
 * statement followed on its own line by `// TEXT` prints the line TEXT; one without a comment on
 * its line prints the lines of the `// ` comments right below it (up to a line that is not a
 * comment), one printed line each. `…` stands for any text (an id, a time).
 */

/** The printed lines each `console.log` of `code` states, in the order they appear in the text. */
export function statedOutput(code: string): string[][] {
  const source = ts.createSourceFile('block.ts', code, ts.ScriptTarget.Latest, true);
  const lines = code.split('\n');
  const stated: string[][] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isExpressionStatement(node) && isConsoleLog(node.expression)) {
      const last = source.getLineAndCharacterOfPosition(node.end).line;
      const rest = (lines[last] ?? '').slice(source.getLineAndCharacterOfPosition(node.end).character);
      const trailing = /^\s*\/\/ ?(.*)$/.exec(rest);
      if (trailing) stated.push([trailing[1] ?? '']);
      else {
        const below: string[] = [];
        for (let at = last + 1; at < lines.length; at++) {
          const comment = /^\s*\/\/ ?(.*)$/.exec(lines[at] ?? '');
          if (!comment) break;
          below.push(comment[1] ?? '');
        }
        if (below.length > 0) stated.push(below);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return stated;
}

function isConsoleLog(expression: ts.Expression): boolean {
  return (
    ts.isCallExpression(expression) &&
    ts.isPropertyAccessExpression(expression.expression) &&
    ts.isIdentifier(expression.expression.expression) &&
    expression.expression.expression.text === 'console' &&
    expression.expression.name.text === 'log'
  );
}

/**
 * Where `stdout` differs from what was stated: each statement's lines must appear as consecutive
 * lines of the output, after those of the statement before it. Returns one line per miss.
 */
export function outputMisses(stdout: string, stated: readonly (readonly string[])[]): string[] {
  const printed = stdout.split('\n').map((line) => line.trimEnd());
  const misses: string[] = [];
  let from = 0;
  for (const group of stated) {
    const patterns = group.map(lineMatcher);
    let found = -1;
    for (let start = from; start + patterns.length <= printed.length && found < 0; start++) {
      if (patterns.every((pattern, k) => pattern.test(printed[start + k] ?? ''))) found = start;
    }
    if (found < 0) misses.push(`it says it prints ${JSON.stringify(group)}, not printed (as consecutive lines) after line ${from} of its output`);
    else from = found + patterns.length;
  }
  return misses;
}

/** A stated line as a whole-line pattern: literal text, `…` any text. */
function lineMatcher(stated: string): RegExp {
  const literal = stated
    .trimEnd()
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${literal}$`, 'u');
}
