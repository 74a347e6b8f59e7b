import { describe, expect, it } from 'vitest';
import { oneLine, renderAgentResult, renderInbox } from '../../../src/engine/inbox.js';
import type { AgentResult } from '../../../src/engine/types.js';

/** The tags a parent reads for its finished children, spelled out from CONTRACT §4. */

const usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const result = (outcome: AgentResult['outcome'], extra: Partial<AgentResult> = {}): AgentResult => ({ name: 'scout', outcome, text: '', usage, ...extra });

describe('inbox tags (CONTRACT §4)', () => {
  it('a reply is its tag, a newline, and the payload as is', () => {
    expect(renderAgentResult(result('replied', { text: 'line 1\n\n  line 2 ' }))).toBe("[agent 'scout' replied]\nline 1\n\n  line 2 ");
  });

  it('every other outcome is exactly one literal line', () => {
    expect(renderAgentResult(result('empty'))).toBe("[agent 'scout' finished with no output]");
    expect(renderAgentResult(result('capped', { reason: 'step cap of 3 reached' }))).toBe("[agent 'scout' hit the step cap]");
    expect(renderAgentResult(result('cancelled', { reason: 'cancelled by root' }))).toBe("[agent 'scout' was cancelled]");
    expect(renderAgentResult(result('failed', { reason: 'HTTP 401: bad key' }))).toBe("[agent 'scout' failed: HTTP 401: bad key]");
  });

  it('a failure reason spread over lines and tabs is folded onto the tag line', () => {
    expect(renderAgentResult(result('failed', { reason: '\n\tboom\n\n  at x  \n' }))).toBe("[agent 'scout' failed: boom at x]");
    expect(oneLine('  a \t\r\n b  ')).toBe('a b');
    expect(oneLine('')).toBe('');
  });

  it('several results are one turn, separated by a blank line, in arrival order', () => {
    const text = renderInbox([result('replied', { name: 'a', text: 'A' }), result('empty', { name: 'b' }), result('capped', { name: 'c' })]);
    expect(text).toBe("[agent 'a' replied]\nA\n\n[agent 'b' finished with no output]\n\n[agent 'c' hit the step cap]");
    expect(renderInbox([])).toBe('');
  });
});
