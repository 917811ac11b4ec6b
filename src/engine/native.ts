// Loads the napi-rs addon built from crates/engine-napi (`npm run build:native` writes native/).
import { createRequire } from 'node:module';
import { dirname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

interface EngineAddon {
  engineVersion(): string;
}

const here = dirname(fileURLToPath(import.meta.url));
// This file runs from src/engine (tests) or dist/src/engine (built); native/ sits at the package root.
const packageRoot = resolve(here, here.includes(`${sep}dist${sep}`) ? '../../..' : '../..');
const addon = createRequire(import.meta.url)(resolve(packageRoot, 'native/index.cjs')) as EngineAddon;

export const engineVersion = (): string => addon.engineVersion();
