// An outcome as the store records it: encoded where it is formed, without producer_id and
// producer_sequence, which the store appends at commit (protobuf's merge rule: a field appended to an
// encoded message sets it, so the result decodes as if the message had been encoded whole).
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { OutcomeSchema } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

const PRODUCER_ID = OutcomeSchema.field.producerId!.number;
const PRODUCER_SEQUENCE = OutcomeSchema.field.producerSequence!.number;

/** An Outcome, encoded without producer_id and producer_sequence. */
export interface EncodedOutcome {
  readonly queueId: string;
  /** May be encoded when first read, the same bytes whenever (outcomes/outcome-encoding.ts). */
  readonly bytes: Uint8Array;
}

/** The recorded outcome: `outcome` with the store's producer_id and producer_sequence. */
export function withProducer(outcome: Uint8Array, producerId: string, sequence: bigint): Uint8Array {
  return new BinaryWriter()
    .raw(outcome)
    .tag(PRODUCER_ID, WireType.LengthDelimited)
    .string(producerId)
    .tag(PRODUCER_SEQUENCE, WireType.Varint)
    .uint64(sequence)
    .finish();
}
