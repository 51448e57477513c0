// Runs before `npm test` and `npm start`: installs the locked dependencies when they are missing
// or older than package-lock.json, so one command works on a fresh clone.
import { execSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const installed = 'node_modules/.package-lock.json';
const stale =
  !existsSync(installed) || statSync(installed).mtimeMs < statSync('package-lock.json').mtimeMs;
if (stale) {
  console.log('Installing dependencies (npm ci)...');
  execSync('npm ci --no-audit --no-fund', { stdio: 'inherit' });
}
