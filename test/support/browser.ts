// Debian's Chromium, headless, driven by playwright-core: the one launcher of
// the browser tests. A test is skipped (with one line saying why) only when
// /usr/bin/chromium is missing; .ci/run installs it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether Chromium is installed; when it is not, says once that `name` is skipped. */
export function chromiumAvailable(name: string): boolean {
  const available = fs.existsSync(CHROMIUM);
  if (!available) console.warn(`[${name}] skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);
  return available;
}

export interface Browser {
  context: BrowserContext;
  /** Closes the browser and removes its profile folder. */
  close(): Promise<void>;
}

/** A headless Chromium with a throwaway profile. */
export async function launchChromium(name: string, options: { viewport?: { width: number; height: number }; javaScriptEnabled?: boolean } = {}): Promise<Browser> {
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-chromium-`));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    ...(options.viewport ? { viewport: options.viewport } : {}),
    ...(options.javaScriptEnabled === false ? { javaScriptEnabled: false } : {}),
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
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profileDir, { recursive: true, force: true });
    },
  };
}
