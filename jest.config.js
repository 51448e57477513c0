/**
 * The test tiers, one Jest project each: `npm test` runs the three, `npm run test:<tier>` one.
 * A spec file's tier is decided by what it starts, through what it imports from test/:
 *
 * - `unit`: nothing but the Jest worker's own process (Nest apps in process, HTTP on loopback,
 *   the in-memory store). Every spec not listed below.
 * - `integration`: a server or a child process: Redis (single, Cluster, Sentinel), PostgreSQL,
 *   Chromium, apps and scripts run by `node`.
 * - `consumer`: what a user of the package runs: the packed tarball in apps of its own, the
 *   conformance suite on Node 22, clients in another language (Python, curl).
 *
 * Paths are relative to this file; one ending in `/` is every spec under that folder.
 * test/tiers.spec.ts (unit) checks that every spec file is in exactly one tier and that a spec
 * in `unit` starts nothing: a new spec that starts a server fails it until it is listed here.
 */
export const TIERS = {
  integration: [
    'test/bullmq/',
    'test/console/console-bearer.browser.e2e-spec.ts',
    'test/console/console-redis.e2e-spec.ts',
    'test/console/console.browser.e2e-spec.ts',
    'test/docs/clients-code.e2e-spec.ts',
    'test/docs/figures.spec.ts',
    'test/e2e/demo-queue.e2e-spec.ts',
    'test/e2e/durable.e2e-spec.ts',
    'test/e2e/isolation.e2e-spec.ts',
    'test/e2e/lease.e2e-spec.ts',
    'test/e2e/legacy-redis.e2e-spec.ts',
    'test/e2e/limits-waits.e2e-spec.ts',
    'test/e2e/races.e2e-spec.ts',
    'test/e2e/redis.e2e-spec.ts',
    'test/e2e/ttl.e2e-spec.ts',
    'test/faults/',
    'test/health/health.e2e-spec.ts',
    'test/hostile/',
    'test/http/throttler.e2e-spec.ts',
    'test/multiprocess/',
    'test/newcomer/arguments.e2e-spec.ts',
    'test/notify/fanout.spec.ts',
    'test/pg-boss/',
    'test/postgres/',
    'test/redis/',
    'test/rekog/',
    'test/scripts/ensure-deps.spec.ts',
    'test/servers/run-mark.spec.ts',
    'test/task-listing.e2e-spec.ts',
    'test/telemetry/telemetry-queue.e2e-spec.ts',
    'test/tools/scoped-tools.e2e-spec.ts',
    'test/tools/steps.spec.ts',
    'test/tools/waiting.e2e-spec.ts',
  ],
  consumer: [
    'test/conformance/',
    'test/consumer/',
    'test/docs/clients.e2e-spec.ts',
    'test/docs/python-client.e2e-spec.ts',
  ],
};

/**
 * Specs that start nothing but take long on their own: they run in `integration`, so that `unit`
 * stays under a minute on two cores. The seeded fuzz suite (about a minute of CPU); the client's
 * ride through server restarts (28 s, mostly its retry backoff) and the error matrix over both
 * HTTP platforms (24 s): with them, `test:unit` took 81 s on an idle two-core machine. The leak
 * guard after malformed requests (25 s, nearly all of it full collections of the worker's heap)
 * left it at 58 to 62 s.
 */
export const LONG = [
  'test/e2e/fuzz.e2e-spec.ts',
  'test/e2e/client-restart.e2e-spec.ts',
  'test/e2e/errors.e2e-spec.ts',
  'test/e2e/retention.e2e-spec.ts',
];

const rootDir = import.meta.dirname;
const SPECS = ['**/*.spec.ts', '**/*.e2e-spec.ts'];

/** Jest's globs for the listed paths (a folder: its specs). */
const globs = (paths) =>
  paths.flatMap((path) =>
    path.endsWith('/') ? SPECS.map((spec) => `<rootDir>/${path}${spec}`) : [`<rootDir>/${path}`],
  );

/** A path as the start of a regular expression on absolute paths (Jest's ignore patterns). */
const prefix = (path) => `^<rootDir>/${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;

/** What every tier shares: Jest runs the TypeScript sources as native ES modules (NestJS 12 ships ESM only). */
const project = (displayName, testMatch, testPathIgnorePatterns = []) => ({
  displayName,
  rootDir,
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch,
  testPathIgnorePatterns: ['/node_modules/', ...testPathIgnorePatterns],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  setupFiles: ['<rootDir>/test/support/setup.ts'],
});

/** The three tiers as Jest projects. */
export const PROJECTS = [
  project(
    'unit',
    SPECS.map((spec) => `<rootDir>/test/${spec}`),
    [...TIERS.integration, ...LONG, ...TIERS.consumer].map(prefix),
  ),
  project('integration', globs([...TIERS.integration, ...LONG])),
  project('consumer', globs(TIERS.consumer)),
];

/**
 * `npm run test:<tier>` sets TEST_TIER to run one tier (rather than Jest's `--selectProjects`,
 * which would take a file named after it for one more project name); `npm test` runs them all.
 */
const tier = process.env.TEST_TIER;
if (tier && !PROJECTS.some((project) => project.displayName === tier)) {
  throw new Error(`TEST_TIER is ${tier}: unit, integration or consumer, or unset for all three`);
}

export default {
  projects: tier ? PROJECTS.filter((project) => project.displayName === tier) : PROJECTS,
  // A failed test file can leave servers it started running (and Jest waiting on their pipes):
  // every process a test starts carries a mark of the run, and the teardown kills what is left.
  globalSetup: '<rootDir>/test/support/servers/jest-global-setup.mjs',
  globalTeardown: '<rootDir>/test/support/servers/jest-global-teardown.mjs',
  // In CI (CI=true) Jest exits once the results are in, whatever a test left open: a leak must
  // not cost the run its time limit. Locally it waits, and says what kept it.
  forceExit: ['true', '1'].includes(process.env.CI ?? ''),
  testTimeout: 30_000,
  // Two test files at once: most of a file's time is spent waiting on servers and timers, so two
  // workers halve the suite's time on two cores (each file starts its own servers on free ports).
  maxWorkers: 2,
};
