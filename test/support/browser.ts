// Headless Chromium for page tests: Debian's package (/usr/bin/chromium, installed by .ci/run), driven by
// playwright-core, which never downloads a browser. CHROMIUM_PATH points elsewhere.
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH });
}
