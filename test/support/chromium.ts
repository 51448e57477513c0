import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** The browser: CHROMIUM_PATH, else /usr/bin/chromium, else `chromium` on PATH. */
export function findChromium(): string {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  for (const path of candidates) if (path && existsSync(path)) return path;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      const found = execFileSync('which', [name], { encoding: 'utf8' }).trim();
      if (found) return found;
    } catch {
      // not on PATH
    }
  }
  throw new Error(
    'No Chromium for the console browser test. Install it (Debian/Ubuntu: ' +
      '`apt-get install -y --no-install-recommends chromium`) or set CHROMIUM_PATH to a ' +
      'Chromium or Chrome binary.',
  );
}
