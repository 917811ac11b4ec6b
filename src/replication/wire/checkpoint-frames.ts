// A compressed checkpoint read back as it arrives: the object store hands its bytes over in chunks, and each
// zstd frame (4 MiB of checkpoint, crates/engine-napi/src/checkpoint_compression.rs) is decompressed on the libuv
// thread pool into its own place in the checkpoint's buffer as soon as its last byte is there, while the rest
// are still downloading. The buffer's pages are first written by those threads, not the event loop.
import { decompressCheckpointFrame, nextCheckpointFrame } from '../../engine/native.js';

export class CheckpointInflater {
  /** The checkpoint's bytes: whole once `finished` answers. */
  private readonly raw: Uint8Array;
  /** Compressed bytes handed to a frame's decompression so far. */
  private framed = 0;
  /** Checkpoint bytes those frames fill. */
  private filled = 0;
  /** Each frame's decompression, settled with its error if it failed: none is left unobserved. */
  private readonly frames: Promise<unknown>[] = [];
  /** The first frame found corrupt; nothing more is started after it. */
  private corrupt: unknown;

  constructor(rawBytes: number) {
    this.raw = new Uint8Array(rawBytes);
  }

  /**
   * `stored` holds the object's first `arrived` bytes (later chunks are written after them, never over them):
   * starts decompressing every whole frame among them not started yet.
   */
  arrived(stored: Uint8Array, arrived: number): void {
    while (this.corrupt === undefined) {
      let frame: ReturnType<typeof nextCheckpointFrame>;
      try {
        frame = nextCheckpointFrame(stored.subarray(this.framed, arrived));
      } catch (err) {
        this.corrupt = err;
        return;
      }
      if (frame === null) return;
      if (this.filled + frame.rawBytes > this.raw.length) {
        this.corrupt = new Error(`its frames hold more than the ${this.raw.length} bytes named`);
        return;
      }
      const bytes = stored.subarray(this.framed, this.framed + frame.compressedBytes);
      const out = this.raw.subarray(this.filled, this.filled + frame.rawBytes);
      this.frames.push(
        decompressCheckpointFrame(bytes, out).then(
          () => undefined,
          (err: unknown) => err ?? new Error('a frame failed'),
        ),
      );
      this.framed += frame.compressedBytes;
      this.filled += frame.rawBytes;
    }
  }

  /** The checkpoint, once every frame is decompressed; throws if a frame was corrupt or the frames do not cover the object and the checkpoint exactly. */
  async finished(storedBytes: number): Promise<Uint8Array> {
    const failed = (await Promise.all(this.frames)).find((err) => err !== undefined);
    if (this.corrupt !== undefined) throw this.corrupt;
    if (failed !== undefined) throw failed;
    if (this.framed !== storedBytes) throw new Error(`its last frame ends at byte ${this.framed} of ${storedBytes}`);
    if (this.filled !== this.raw.length) throw new Error(`its frames hold ${this.filled} of the ${this.raw.length} bytes named`);
    return this.raw;
  }
}
