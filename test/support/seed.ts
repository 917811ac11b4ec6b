// Seeding a data directory before the service starts: active tickets written straight into the store,
// as a service that had acknowledged them would have left them, in the order given (their positions).
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { LmdbStore } from '../../src/store/lmdb-store.js';
import type { StoreChange } from '../../src/store/store.js';
import { uuid } from './fixtures.js';

export interface SeedTicket {
  id: string;
  engineInput?: Uint8Array;
}

export async function seedTickets(dataDir: string, queueId: string, tickets: Iterable<SeedTicket>): Promise<void> {
  const store = new LmdbStore({
    path: dataDir,
    onFatal: (err) => {
      throw err;
    },
  });
  let batch: StoreChange[] = [];
  let position = 0;
  for (const { id, engineInput } of tickets) {
    const ticket = toBinary(TicketSchema, create(TicketSchema, { id, queueId, createdAt: timestampNow(), engineInput }));
    batch.push({ type: 'ticket.put', ticket: { queueId, ticketId: id, position: ++position, ticket, state: 'active' } });
    if (batch.length === 20_000) {
      await store.commit(batch);
      batch = [];
    }
  }
  if (batch.length > 0) await store.commit(batch);
  await store.close();
}

/** `count` tickets with fresh ids and the same engine_input. */
export function* alike(count: number, engineInput: Uint8Array): Generator<SeedTicket> {
  for (let i = 0; i < count; i++) yield { id: uuid(), engineInput };
}
