//! A replicated queue's checkpoints as zstd frames (`compressCheckpoint`, `nextCheckpointFrame`,
//! `decompressCheckpointFrame`). A checkpoint of a million tickets is ~430 MB, so the work runs on the libuv
//! thread pool, never on the event loop. It is cut into frames of `FRAME_RAW_BYTES`, each with its content
//! size and checksum: a reader decompresses each frame as soon as its bytes have arrived, while the rest are
//! still downloading, into its own place in the checkpoint's buffer; and a frame cut short or altered is refused
//! here rather than decoded. Concatenated frames are one standard zstd stream (`zstd -d` reads the object).

use napi::bindgen_prelude::{AsyncTask, Buffer, Env, Result, Task, Uint8Array};
use napi_derive::napi;
use zstd::bulk::{Compressor, Decompressor};
use zstd::zstd_safe::{self, zstd_sys::ZSTD_ErrorCode, CParameter};

use crate::error::BindingError;

/// zstd's fastest standard level: about 2.8x smaller for checkpoints of realistic tickets; higher levels
/// gain a few percent for twice the time.
const LEVEL: i32 = 1;

/// The checkpoint bytes in one frame (the last may hold fewer): small enough that the first frame is
/// decompressed soon after the download starts, large enough that zstd's window (512 KiB at level 1) is full.
const FRAME_RAW_BYTES: usize = 4 << 20;

/// Compresses one checkpoint into frames of `FRAME_RAW_BYTES`.
pub struct CompressTask {
    bytes: Uint8Array,
}

impl CompressTask {
    /// # Safety
    ///
    /// JavaScript must not write to `bytes` until the task's promise settles: `compute` reads it on another
    /// thread without synchronization.
    unsafe fn new(bytes: Uint8Array) -> Self {
        CompressTask { bytes }
    }
}

#[napi]
impl Task for CompressTask {
    type Output = Vec<u8>;
    type JsValue = Buffer;

    fn compute(&mut self) -> Result<Vec<u8>> {
        let failed = |err: std::io::Error| BindingError::Compression(err.to_string());
        let mut compressor = Compressor::new(LEVEL).map_err(failed)?;
        compressor.set_parameter(CParameter::ChecksumFlag(true)).map_err(failed)?;
        let mut frames = Vec::with_capacity(self.bytes.len() / 2);
        let mut frame = Vec::with_capacity(zstd_safe::compress_bound(FRAME_RAW_BYTES));
        for raw in self.bytes.chunks(FRAME_RAW_BYTES) {
            frame.clear();
            compressor.compress_to_buffer(raw, &mut frame).map_err(failed)?;
            frames.extend_from_slice(&frame);
        }
        Ok(frames)
    }

    fn resolve(&mut self, _env: Env, frames: Vec<u8>) -> Result<Buffer> {
        Ok(frames.into())
    }
}

/// Where the next frame ends in a compressed checkpoint's bytes, and how many bytes it holds.
#[napi(object)]
pub struct CheckpointFrame {
    pub compressed_bytes: f64,
    pub raw_bytes: f64,
}

/// The frame `bytes` begin with, if all of it is there (none: its end has not arrived yet). Throws for bytes
/// that are not a frame, or a frame that does not name its content size.
#[napi]
pub fn next_checkpoint_frame(bytes: Uint8Array) -> Result<Option<CheckpointFrame>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let corrupt = |reason: &str| BindingError::CorruptFrame(reason.to_string());
    let compressed = match zstd_safe::find_frame_compressed_size(&bytes) {
        Ok(size) => size,
        Err(code) if zstd_safe::is_error_kind(code, ZSTD_ErrorCode::ZSTD_error_srcSize_wrong) => return Ok(None),
        Err(code) => return Err(corrupt(zstd_safe::get_error_name(code)).into()),
    };
    match zstd_safe::get_frame_content_size(&bytes[..compressed]) {
        Ok(Some(raw)) => Ok(Some(CheckpointFrame { compressed_bytes: compressed as f64, raw_bytes: raw as f64 })),
        Ok(None) => Err(corrupt("a frame does not name its content size").into()),
        Err(_) => Err(corrupt("a frame's header is corrupt").into()),
    }
}

/// Decompresses one frame into its place in the checkpoint's buffer, which it must fill exactly.
pub struct DecompressFrameTask {
    frame: Uint8Array,
    out: Uint8Array,
}

impl DecompressFrameTask {
    /// # Safety
    ///
    /// JavaScript must not write to `frame`, nor read or write `out`, until the task's promise settles:
    /// `compute` reads and writes them on another thread without synchronization.
    unsafe fn new(frame: Uint8Array, out: Uint8Array) -> Self {
        DecompressFrameTask { frame, out }
    }
}

#[napi]
impl Task for DecompressFrameTask {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        let corrupt = |reason: String| BindingError::CorruptFrame(reason);
        let mut decompressor = Decompressor::new().map_err(|err| corrupt(err.to_string()))?;
        // SAFETY: `new`'s caller promised that JavaScript leaves `out` alone until this task's promise settles,
        // so this is the only reference to its memory; `self.out` keeps it alive.
        let out = unsafe { self.out.as_mut() };
        let written =
            decompressor.decompress_to_buffer(&self.frame[..], out).map_err(|err| corrupt(err.to_string()))?;
        if written != out.len() {
            return Err(
                corrupt(format!("a frame holds {written} bytes, not the {} its header names", out.len())).into()
            );
        }
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _: ()) -> Result<()> {
        Ok(())
    }
}

/// A checkpoint's bytes as zstd frames of 4 MiB each (content size and checksum included), compressed off the
/// event loop. JavaScript must not write to `bytes` until the promise settles.
#[napi]
pub fn compress_checkpoint(bytes: Uint8Array) -> AsyncTask<CompressTask> {
    // SAFETY: `CompressTask::new`'s duty falls on JavaScript, as this function's declaration says; the
    // checkpoint store (src/replication/jetstream/checkpoint-objects.ts) awaits it before it lets go of `bytes`.
    AsyncTask::new(unsafe { CompressTask::new(bytes) })
}

/// Decompresses one frame (as `nextCheckpointFrame` found it) into `out`, off the event loop; rejects a frame
/// that is corrupt, fails its checksum or does not fill `out` exactly. JavaScript must not write to `frame`, nor
/// touch `out`, until the promise settles.
#[napi]
pub fn decompress_checkpoint_frame(frame: Uint8Array, out: Uint8Array) -> AsyncTask<DecompressFrameTask> {
    // SAFETY: as in `compress_checkpoint`: the checkpoint's reader (src/replication/wire/checkpoint-frames.ts)
    // hands each frame's bytes and place once and awaits every task before it reads or lets go of them.
    AsyncTask::new(unsafe { DecompressFrameTask::new(frame, out) })
}
