// Loads the napi-rs addon built from crates/engine-napi (`npm run build:native` writes native/).
import { createRequire } from 'node:module';
import { dirname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as Addon from '../../native/index.cjs';

export type { MatchArrays, PoolArrays, PoolChangeArrays, QueueParams, RulesetParams } from '../../native/index.cjs';

const here = dirname(fileURLToPath(import.meta.url));
// This file runs from src/engine (tests) or dist/src/engine (built); native/ sits at the package root.
const packageRoot = resolve(here, here.includes(`${sep}dist${sep}`) ? '../../..' : '../..');
const addon = createRequire(import.meta.url)(resolve(packageRoot, 'native/index.cjs')) as typeof Addon;

export const engineVersion = (): string => addon.engineVersion();
/** Sets the threads every engine shares (only the first call counts); answers the count in force. */
export const useEngineThreads = (threads: number): number => addon.useEngineThreads(threads);
export const TickEngine = addon.TickEngine;
export type TickEngine = Addon.TickEngine;
/**
 * A replicated queue's checkpoint as zstd frames of 4 MiB (content size and checksum in each), compressed on the
 * libuv thread pool (crates/engine-napi/src/checkpoint_compression.rs). `bytes` must not change until it settles.
 */
export const compressCheckpoint = (bytes: Uint8Array): Promise<Uint8Array> => addon.compressCheckpoint(bytes);
/** The whole frame `bytes` begin with: its length and what it holds; null until its end is there. Throws for a corrupt one. */
export const nextCheckpointFrame = (bytes: Uint8Array): Addon.CheckpointFrame | null => addon.nextCheckpointFrame(bytes);
/**
 * One checkpoint frame decompressed into `out`, which it must fill exactly, on the libuv thread pool. Neither may
 * be touched until it settles.
 */
export const decompressCheckpointFrame = (frame: Uint8Array, out: Uint8Array): Promise<void> => addon.decompressCheckpointFrame(frame, out);
/** The engine's "no host" marker in matchPreferredHost. */
export const NO_HOST = 0xffff_ffff;
