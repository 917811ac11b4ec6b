#!/usr/bin/env node
// The `matchmaker` command (package.json "bin"): the compiled CLI, dist/src/cli.js, built by `npm install`.
// A committed file, so npm links it (and marks it executable) even before the build has run.
import '../dist/src/cli.js';
