import type { Usage } from './types.js';

/** US$ per million tokens: input, output. Cache writes cost 1.25× input, cache reads 0.1× input. */
interface Price {
  readonly input: number;
  readonly output: number;
}

// Public list prices by model family, matched on the model id; an estimate, not a bill.
const PRICES: readonly (readonly [RegExp, Price])[] = [
  [/opus-4-[5-9]|opus-[5-9]/, { input: 5, output: 25 }],
  [/opus/, { input: 15, output: 75 }],
  [/sonnet/, { input: 3, output: 15 }],
  [/haiku-4|haiku-[5-9]/, { input: 1, output: 5 }],
  [/haiku/, { input: 0.8, output: 4 }],
];

/** Estimated cost in US$, or undefined for a model whose price is not known. */
export function estimateCost(model: string, usage: Usage): number | undefined {
  const price = PRICES.find(([pattern]) => pattern.test(model))?.[1];
  if (!price) return undefined;
  const perToken = (dollarsPerMillion: number): number => dollarsPerMillion / 1_000_000;
  return (
    usage.inputTokens * perToken(price.input) +
    usage.cacheCreationInputTokens * perToken(price.input * 1.25) +
    usage.cacheReadInputTokens * perToken(price.input * 0.1) +
    usage.outputTokens * perToken(price.output)
  );
}
