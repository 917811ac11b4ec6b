// A stand-in for the game's server orchestrator: "provisions" a match's server on the host the engine chose,
// falling back to the other acceptable hosts. With `failEvery` N, every N-th provisioning fails on every host
// (deterministically: tests and demos see the compensation path, a reactivation, without chance).

export interface Provisioned {
  host: string;
  /** Where the players connect. */
  address: string;
}

export class Provisioner {
  private attempts = 0;

  constructor(private readonly failEvery: number) {}

  /** Resolves with the server, or undefined when no host could take the match. */
  async provision(matchId: string, hosts: readonly string[]): Promise<Provisioned | undefined> {
    this.attempts++;
    if (this.failEvery > 0 && this.attempts % this.failEvery === 0) return undefined;
    const host = hosts[0];
    if (host === undefined) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 20)); // the orchestrator's round trip
    return { host, address: `${host}.game.example:${7000 + (this.attempts % 1000)}/${matchId.slice(0, 8)}` };
  }
}
