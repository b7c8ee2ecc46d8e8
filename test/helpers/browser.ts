// Debian's headless Chromium, driven by playwright-core, with a profile of its own that
// goes with the test: the browser of the runtimes test and of the console's. Nothing it
// does reaches outside the machine (no sync, no component updates, no background fetches).
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';

/** Where the tests find Chromium (Debian's `chromium` package, which setup-tests.sh installs). */
export const CHROMIUM = '/usr/bin/chromium';

/** A fresh headless Chromium, closed and its profile removed when `t` ends; `viewport` for screenshots. */
export async function launchChromium(t: Test, viewport?: { width: number; height: number }): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'api-auth-chromium-'));
  t.teardown(() => rmSync(profile, { recursive: true, force: true }));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    ...(viewport === undefined ? {} : { viewport }),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(() => browser.close());
  return browser;
}
