import type { AgentIdentity } from '../src/types.js';

export interface LiveChild {
  /** The spawned actor's id: a decimal number, see `sessionMachine`'s spawn. */
  readonly actorId: string;
  readonly agent: AgentIdentity;
}

/**
 * A session's live children, by name and by actor id. Mutated in place and shared by snapshots,
 * like the history: copying a record of 10,000 children on every spawn and every delivery made
 * a fan-out quadratic.
 */
export class ChildRegistry {
  private readonly byName = new Map<string, LiveChild>();
  private readonly byActor = new Map<string, LiveChild>();

  get size(): number {
    return this.byName.size;
  }

  byNameOf(name: string): LiveChild | undefined {
    return this.byName.get(name);
  }

  byActorId(actorId: string): LiveChild | undefined {
    return this.byActor.get(actorId);
  }

  add(child: LiveChild): void {
    this.byName.set(child.agent.name, child);
    this.byActor.set(child.actorId, child);
  }

  remove(actorId: string): LiveChild | undefined {
    const child = this.byActor.get(actorId);
    if (!child) return undefined;
    this.byActor.delete(actorId);
    this.byName.delete(child.agent.name);
    return child;
  }

  values(): IterableIterator<LiveChild> {
    return this.byName.values();
  }

  /** Persisted snapshots hold the list. */
  toJSON(): LiveChild[] {
    return [...this.byName.values()];
  }
}
