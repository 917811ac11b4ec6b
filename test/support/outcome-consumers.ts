// The client SDK's outcome consumers in tests: the next delivery, with a deadline.
import type { OutcomeConsumer, OutcomeDelivery } from '@matchmaker/client';

/** The next delivery of the consumer (without closing it, as leaving a for-await loop would). */
export async function nextDelivery(consumer: OutcomeConsumer, timeoutMs = 10_000): Promise<OutcomeDelivery> {
  const result = await Promise.race([
    consumer[Symbol.asyncIterator]().next(),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no delivery within ${timeoutMs} ms`)), timeoutMs)),
  ]);
  if (result.done) throw new Error('the consumer ended');
  return result.value;
}
