import type { AgentIdentity } from '../src/engine/types.js';
import { CREW_SIZE } from './crew.js';

export interface LiveChild {
  /** The spawned actor's id: a decimal number, unique within its parent session. */
  readonly actorId: string;
  readonly agent: AgentIdentity;
  /** The crew actor holding it (see machines/crew.ts). */
  readonly crewId: string;
}

interface Crew {
  spawned: number;
  live: number;
}

/**
 * A session's live children, by name and by actor id, and the crews that hold them. Mutated in
 * place and shared by snapshots, like the history: copying a record of 10,000 children on every
 * spawn and every delivery made a fan-out quadratic.
 */
export class ChildRegistry {
  /** Made on the first spawn: most sessions (every leaf sub-agent) never spawn, and pay nothing. */
  private state: RegistryState | undefined;

  private get live(): RegistryState {
    return (this.state ??= new RegistryState());
  }

  get size(): number {
    return this.state?.byName.size ?? 0;
  }

  byNameOf(name: string): LiveChild | undefined {
    return this.state?.byName.get(name);
  }

  byActorId(actorId: string): LiveChild | undefined {
    return this.state?.byActor.get(actorId);
  }

  /** Counts a spawn of `name` and returns its number (1 for the first). */
  nextUse(name: string): number {
    const uses = this.live.uses;
    const use = (uses.get(name) ?? 0) + 1;
    uses.set(name, use);
    return use;
  }

  /** A resumed session's spawns per name, so a reused name still gets a fresh id. */
  restoreUses(uses: Iterable<readonly [string, number]>): void {
    for (const [name, count] of uses) this.live.uses.set(name, count);
  }

  /**
   * Registers a child in the open crew, or in a new one (the caller spawns each crew with its
   * members). A crew is open only within one tool batch (see `closeCrew`).
   */
  add(actorId: string, agent: AgentIdentity): LiveChild {
    const live = this.live;
    let crewId = live.openCrew;
    if (crewId === undefined) {
      crewId = `crew.${++live.crewsMade}`;
      live.crews.set(crewId, { spawned: 0, live: 0 });
      live.openCrew = crewId;
    }
    const crew = live.crews.get(crewId) as Crew;
    crew.spawned += 1;
    crew.live += 1;
    if (crew.spawned >= CREW_SIZE) live.openCrew = undefined;
    const child: LiveChild = { actorId, agent, crewId };
    live.byName.set(agent.name, child);
    live.byActor.set(actorId, child);
    return child;
  }

  /** Ends a batch's spawning: crews are spawned with all their members, so the next batch starts a new one. */
  closeCrew(): void {
    if (this.state) this.state.openCrew = undefined;
  }

  /** Forgets a finished child; returns it, and the id of its crew when that crew is done with. */
  remove(actorId: string): { child: LiveChild; emptyCrew: string | undefined } | undefined {
    const live = this.state;
    const child = live?.byActor.get(actorId);
    if (!live || !child) return undefined;
    live.byActor.delete(actorId);
    live.byName.delete(child.agent.name);
    const crew = live.crews.get(child.crewId) as Crew;
    crew.live -= 1;
    if (crew.live > 0) return { child, emptyCrew: undefined };
    // A crew with no one left goes, so finished work leaves nothing behind in the actor tree.
    live.crews.delete(child.crewId);
    if (live.openCrew === child.crewId) live.openCrew = undefined;
    return { child, emptyCrew: child.crewId };
  }

  values(): IterableIterator<LiveChild> {
    return (this.state?.byName ?? NO_CHILDREN).values();
  }

  /** Persisted snapshots hold the list. */
  toJSON(): LiveChild[] {
    return [...this.values()];
  }
}

const NO_CHILDREN: ReadonlyMap<string, LiveChild> = new Map();

class RegistryState {
  readonly byName = new Map<string, LiveChild>();
  readonly byActor = new Map<string, LiveChild>();
  readonly crews = new Map<string, Crew>();
  /** Spawns per name, ever (a reused name gets a fresh id). A Map: a record keyed by 10,000 names cost V8 a hidden class per name. */
  readonly uses = new Map<string, number>();
  openCrew: string | undefined;
  crewsMade = 0;
}
