/** The page's colours, from the embedded data (src/watch/viewer/colors.ts). */
class Palette {
  constructor(private readonly data: PageData) {}

  state(state: string): string {
    return Object.hasOwn(this.data.colors, state) ? (this.data.colors[state] as string) : this.data.unknownColor;
  }

  outcome(outcome: string | undefined): string {
    return outcome !== undefined && Object.hasOwn(this.data.outcomeColors, outcome) ? (this.data.outcomeColors[outcome] as string) : this.data.unknownColor;
  }

  light(state: string): boolean {
    return this.data.lightStates.includes(state);
  }

  meaning(state: string): string {
    return this.data.meanings[state] ?? state;
  }

  event(type: string): string {
    if (type === 'cancel' || type === 'model.error') return '#dc2626';
    if (type === 'user.message') return '#0d9488';
    return '#475569';
  }
}
