/**
 * The model a run uses when neither `--model` nor `EXARCH_MODEL` names one. A file of its own so
 * that the command line's help can name it without loading the Anthropic SDK.
 */
export const DEFAULT_MODEL = 'claude-sonnet-5-5';
