/** exarch/testing: the scripted provider, the replay of recorded runs, and checks for tests of agents built on exarch. */
export {
  ScriptedProvider,
  scriptedProvider,
  type RecordedRequest,
  type Script,
  type ScriptedBlock,
  type ScriptedCall,
  type ScriptedFault,
  type ScriptedProviderOptions,
  type ScriptedStep,
} from './scriptedProvider.js';
export { assertToolPairing, findPairingProblems, PairingError } from '../engine/pairing.js';
export { MemoryLogSink } from '../engine/log/sessionLog.js';
export { ReplayProvider, replayProvider, readRecording, type ReplayProviderOptions } from '../providers/replayProvider.js';
export {
  RecordingError,
  ReplayMismatchError,
  type RecordedExchange,
  type RecordedFault,
  type RecordingErrorKind,
  type RecordingHeader,
} from '../replay/format.js';
