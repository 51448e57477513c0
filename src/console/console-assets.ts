import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TasksConfigError } from '../errors.js';

/**
 * The page script's ES modules, served beside the page: `console.js` starts it and imports the
 * others by relative URL (so the same-origin `script-src 'self'` allows them).
 */
export const CONSOLE_SCRIPTS = [
  'console.js',
  'console-api.js',
  'console-detail.js',
  'console-format.js',
  'console-listing.js',
  'console-rows.js',
  'console-sign-in.js',
  'console-state.js',
  'console-stream.js',
] as const;

/** The console's static files, shipped beside this module under `assets/`. */
export interface ConsoleFiles {
  /** The page, with `{{BASE}}` where its own path goes. */
  readonly html: string;
  /** Each of CONSOLE_SCRIPTS by its file name. */
  readonly scripts: ReadonlyMap<string, string>;
  readonly css: string;
}

// The same URL in src/ and in the built package: the build keeps this module at
// dist/console/console-assets.js and copies the files to dist/console/assets/ (tsdown.config.ts).
const ASSETS = new URL('./assets/', import.meta.url);

/**
 * Reads the console's files once, at startup, from `assets/` next to this module (src/ under
 * ts-jest, dist/console/ once built: `npm run build` copies them). A missing file fails the boot
 * with a message naming the folder.
 */
export function readConsoleFiles(from: URL = ASSETS): ConsoleFiles {
  const read = (name: string): string => {
    try {
      return readFileSync(new URL(name, from), 'utf8');
    } catch (error) {
      throw new TasksConfigError(
        `console: cannot read its file ${name} in ${fileURLToPath(from)} ` +
          `(${(error as NodeJS.ErrnoException).code ?? String(error)}); the package's ` +
          'dist/console/assets/ folder must ship beside dist/console/',
      );
    }
  };
  return {
    html: read('console.html'),
    scripts: new Map(CONSOLE_SCRIPTS.map((name) => [name, read(name)])),
    css: read('console.css'),
  };
}

/** The file a request for one of the console's files names: its URL's last path segment. */
export function consoleFileName(url: string): string {
  const path = url.split('?')[0]!;
  return path.slice(path.lastIndexOf('/') + 1);
}

/** `&`, `<`, `>`, `"` and `'` as HTML character references. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
