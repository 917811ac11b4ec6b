// Runs once before any test file (vitest globalSetup): the service tests spawn dist/src/cli.js, so a source
// edit without a build would silently test the old code. Fail the whole run instead, naming the file.
import { resolve } from 'node:path';
import { assertBuildFresh } from '../../bench/build-freshness.js';

export default function setup(): void {
  try {
    assertBuildFresh(resolve(import.meta.dirname, '../..'));
  } catch (err) {
    // The message says all there is to say; without a stack vitest prints it alone, not a code frame.
    (err as Error).stack = (err as Error).message;
    throw err;
  }
}
