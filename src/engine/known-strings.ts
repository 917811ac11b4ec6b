// The short strings an engine input repeats from ticket to ticket (host keys, attribute names and values),
// read by their bytes: a string met before comes back as the same JS string, without decoding it or
// allocating. A follower's apply spent about 7% of its time decoding strings, most of them these
// (bench/RESULTS.md, "Thirtieth session"), and the pool interns them anyway.
import type { BinaryReader } from '@bufbuild/protobuf/wire';

/** Longer strings are decoded every time: host keys and attribute values are names, rarely this long. */
const MOST_BYTES = 48;
/** Entries before the cache starts over, so that a queue whose values change keeps the ones it uses now. */
const MOST_ENTRIES = 4096;

interface Known {
  bytes: Uint8Array;
  text: string;
}

export class KnownStrings {
  private readonly byHash = new Map<number, Known>();

  /**
   * `reader.string(strict)`, the same string for the same bytes. Only ASCII is kept, which decodes alike
   * strict or not; anything else (and any length or bounds error) is left to the reader itself.
   */
  read(reader: BinaryReader, buf: Uint8Array, strict: boolean): string {
    const start = reader.pos;
    const len = reader.uint32();
    const at = reader.pos;
    const end = at + len;
    if (len > MOST_BYTES || end > buf.length) return this.decode(reader, start, strict);
    let hash = len;
    for (let i = at; i < end; i++) {
      const byte = buf[i]!;
      if (byte > 0x7f) return this.decode(reader, start, strict);
      hash = Math.imul(hash ^ byte, 0x01000193);
    }
    const known = this.byHash.get(hash);
    if (known !== undefined && sameBytes(known.bytes, buf, at, len)) {
      reader.pos = end;
      return known.text;
    }
    const text = this.decode(reader, start, strict);
    if (known === undefined) {
      if (this.byHash.size >= MOST_ENTRIES) this.byHash.clear();
      this.byHash.set(hash, { bytes: buf.slice(at, end), text });
    }
    return text;
  }

  private decode(reader: BinaryReader, start: number, strict: boolean): string {
    reader.pos = start;
    return reader.string(strict);
  }
}

function sameBytes(known: Uint8Array, buf: Uint8Array, at: number, len: number): boolean {
  if (known.length !== len) return false;
  for (let i = 0; i < len; i++) if (known[i] !== buf[at + i]) return false;
  return true;
}
