import type { AgentIdentity } from '../src/types.js';
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
  private readonly byName = new Map<string, LiveChild>();
  private readonly byActor = new Map<string, LiveChild>();
  private readonly crews = new Map<string, Crew>();
  /** Spawns per name, ever (a reused name gets a fresh id). A Map: a record keyed by 10,000 names cost V8 a hidden class per name. */
  private readonly uses = new Map<string, number>();
  private openCrew: string | undefined;
  private crewsMade = 0;

  get size(): number {
    return this.byName.size;
  }

  byNameOf(name: string): LiveChild | undefined {
    return this.byName.get(name);
  }

  byActorId(actorId: string): LiveChild | undefined {
    return this.byActor.get(actorId);
  }

  /** Counts a spawn of `name` and returns its number (1 for the first). */
  nextUse(name: string): number {
    const use = (this.uses.get(name) ?? 0) + 1;
    this.uses.set(name, use);
    return use;
  }

  /**
   * Registers a child in the open crew; `newCrew` is set when a crew must be spawned for it. A crew
   * is open only within one tool batch (see `closeCrew`).
   */
  add(actorId: string, agent: AgentIdentity): { child: LiveChild; newCrew: boolean } {
    let newCrew = false;
    let crewId = this.openCrew;
    if (crewId === undefined) {
      crewId = `crew.${++this.crewsMade}`;
      this.crews.set(crewId, { spawned: 0, live: 0 });
      this.openCrew = crewId;
      newCrew = true;
    }
    const crew = this.crews.get(crewId) as Crew;
    crew.spawned += 1;
    crew.live += 1;
    if (crew.spawned >= CREW_SIZE) this.openCrew = undefined;
    const child: LiveChild = { actorId, agent, crewId };
    this.byName.set(agent.name, child);
    this.byActor.set(actorId, child);
    return { child, newCrew };
  }

  /** Ends a batch's spawning: crews are spawned with all their members, so the next batch starts a new one. */
  closeCrew(): void {
    this.openCrew = undefined;
  }

  /** Forgets a finished child; returns it, and the id of its crew when that crew is done with. */
  remove(actorId: string): { child: LiveChild; emptyCrew: string | undefined } | undefined {
    const child = this.byActor.get(actorId);
    if (!child) return undefined;
    this.byActor.delete(actorId);
    this.byName.delete(child.agent.name);
    const crew = this.crews.get(child.crewId) as Crew;
    crew.live -= 1;
    if (crew.live > 0) return { child, emptyCrew: undefined };
    // A crew with no one left goes, so finished work leaves nothing behind in the actor tree.
    this.crews.delete(child.crewId);
    if (this.openCrew === child.crewId) this.openCrew = undefined;
    return { child, emptyCrew: child.crewId };
  }

  values(): IterableIterator<LiveChild> {
    return this.byName.values();
  }

  /** Persisted snapshots hold the list. */
  toJSON(): LiveChild[] {
    return [...this.byName.values()];
  }
}
