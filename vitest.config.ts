import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Fails the run before any test when dist/ is older than src/ (the tests spawn the built CLI).
    globalSetup: ['test/support/global-setup.ts'],
    // Each file starts real services; two cores, so keep the parallelism modest.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
