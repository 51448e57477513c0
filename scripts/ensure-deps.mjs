// Runs before `npm test` and `npm start`: installs the locked dependencies when they are missing
// or differ from package-lock.json, so one command works on a fresh clone.
//
// What is installed is read from npm's own record of it, node_modules/.package-lock.json, and
// compared with package-lock.json package by package: a version that differs, or a package that is
// not there (one marked optional excepted: npm leaves out those for other platforms), means
// `npm ci`. Contents, not file times: a git checkout or worktree writes package-lock.json anew
// without changing it, and an install it does not need would replace node_modules (a worktree's
// node_modules may be another checkout's, linked).
//
// `--check` only tells: it prints why an install is needed and exits 1, or exits 0.
import { execSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';

const INSTALLED = 'node_modules/.package-lock.json';

/** Why the installed packages are not the locked ones, or undefined when they are. */
function whyInstall() {
  if (!existsSync(INSTALLED)) return `${INSTALLED} is missing`;
  const locked = JSON.parse(readFileSync('package-lock.json', 'utf8')).packages ?? {};
  const installed = JSON.parse(readFileSync(INSTALLED, 'utf8')).packages ?? {};
  for (const [path, entry] of Object.entries(locked)) {
    if (path === '') continue; // the project itself
    const present = installed[path];
    if (present === undefined) {
      if (entry.optional === true) continue;
      return `${path} is not installed`;
    }
    if (present.version !== entry.version) {
      return `${path} is ${present.version}, locked at ${entry.version}`;
    }
  }
  return undefined;
}

const why = whyInstall();
if (process.argv.includes('--check')) {
  if (why !== undefined) console.log(why);
  process.exit(why === undefined ? 0 : 1);
}
if (why !== undefined && existsSync('node_modules') && lstatSync('node_modules').isSymbolicLink()) {
  // A worktree that links another checkout's node_modules: `npm ci` would empty that checkout's
  // packages under every process using them. Installing is the owner's call.
  console.error(
    `The installed packages differ from package-lock.json (${why}), and node_modules is a link ` +
      'to another checkout: run `npm ci` there (or replace the link with an install of its own).',
  );
  process.exit(1);
}
if (why !== undefined) {
  console.log(`Installing dependencies (npm ci: ${why})...`);
  execSync('npm ci --no-audit --no-fund', { stdio: 'inherit' });
}
