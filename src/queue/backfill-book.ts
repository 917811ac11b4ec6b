// A queue's open backfill requests: by id, and by the running match they ask players for (one open request
// per match). Each posting gets a version, so a fill the engine computed for one posting is not applied to
// a later posting of the same id.
import type { BackfillRequest } from '../gen/matchmaker/core/v1/resources_pb.js';
import { parseBackfillEngineInput, type ParsedEngineInput } from '../engine/engine-input.js';

export interface OpenBackfill {
  request: BackfillRequest;
  input: ParsedEngineInput;
  version: number;
}

export class BackfillBook {
  private readonly byId = new Map<string, OpenBackfill>();
  /** match_id -> backfill id. */
  private readonly byMatch = new Map<string, string>();
  private next = 1;

  /** The version the next posting gets (a checkpoint carries it). */
  get nextVersion(): number {
    return this.next;
  }

  get size(): number {
    return this.byId.size;
  }

  get(backfillId: string): OpenBackfill | undefined {
    return this.byId.get(backfillId);
  }

  /** The open request for a running match, if any. */
  forMatch(matchId: string): string | undefined {
    return this.byMatch.get(matchId);
  }

  entries(): IterableIterator<[string, OpenBackfill]> {
    return this.byId.entries();
  }

  ids(): string[] {
    return [...this.byId.keys()];
  }

  /** Opens `request` (its engine_input was validated when it was accepted). */
  add(request: BackfillRequest): OpenBackfill {
    const open = { request, input: parseBackfillEngineInput(request.engineInput, 'engine_input'), version: this.next++ };
    this.byId.set(request.id, open);
    this.byMatch.set(request.matchId, request.id);
    return open;
  }

  remove(backfillId: string): OpenBackfill | undefined {
    const open = this.byId.get(backfillId);
    if (!open) return undefined;
    this.byId.delete(backfillId);
    if (this.byMatch.get(open.request.matchId) === backfillId) this.byMatch.delete(open.request.matchId);
    return open;
  }

  /**
   * Replaces the book with requests as a checkpoint holds them: each at its posting version, in the given
   * (opening) order, later postings numbered from `nextVersion`. A fill records the version it saw, so the
   * versions must be the ones the log's records were made against.
   */
  load(requests: readonly { request: BackfillRequest; version: number }[], nextVersion: number): void {
    this.clear();
    for (const { request, version } of requests) {
      this.byId.set(request.id, { request, input: parseBackfillEngineInput(request.engineInput, 'engine_input'), version });
      this.byMatch.set(request.matchId, request.id);
    }
    this.next = nextVersion;
  }

  clear(): void {
    this.byId.clear();
    this.byMatch.clear();
  }
}
