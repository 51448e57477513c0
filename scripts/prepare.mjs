// `npm prepare`: builds dist/ in a source checkout (a clone, or the copy npm makes of a git
// dependency). An installed copy ships dist/ but not src/ or tsconfig.build.json: there the build
// could only fail after removing dist/, so it is skipped and dist/ stays as shipped.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const missing = ['tsconfig.build.json', 'src'].filter((path) => !existsSync(path));
if (missing.length > 0) {
  console.log(
    `nestjs-mcp-tasks: prepare skipped (no ${missing.join(' or ')}: not a source checkout; dist/ kept)`,
  );
  process.exit(0);
}
// npm sets npm_execpath to its own CLI when it runs a script; fall back to the npm on PATH. The
// build's report goes to stderr: `npm pack --json` (which runs prepare) answers on stdout, and
// the report would come before its JSON there.
const npmCli = process.env.npm_execpath;
const stdio = ['inherit', process.stderr, 'inherit'];
const built = npmCli
  ? spawnSync(process.execPath, [npmCli, 'run', 'build'], { stdio })
  : spawnSync('npm', ['run', 'build'], { stdio, shell: process.platform === 'win32' });
if (built.error) throw built.error;
process.exit(built.status ?? 1);
