// Loads the napi-rs addon built from crates/engine-napi (npm run build:native writes native/).
import { createRequire } from 'node:module';

interface EngineAddon {
  engineVersion(): string;
}

const require = createRequire(import.meta.url);
// Resolved from the package root, so it works from src/ (tests) and dist/src/ (built) alike.
const addon = require(new URL('../../native/index.cjs', import.meta.url).pathname.replace('/dist/native/', '/native/')) as EngineAddon;

export const engineVersion = (): string => addon.engineVersion();
