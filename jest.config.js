/** Jest runs the TypeScript sources as native ES modules (NestJS 12 ships ESM only). */
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts', '**/*.e2e-spec.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  setupFiles: ['<rootDir>/test/setup.ts'],
  // A failed test file can leave servers it started running (and Jest waiting on their pipes):
  // every process a test starts carries a mark of the run, and the teardown kills what is left.
  globalSetup: '<rootDir>/test/servers/jest-global-setup.mjs',
  globalTeardown: '<rootDir>/test/servers/jest-global-teardown.mjs',
  // In CI (CI=true) Jest exits once the results are in, whatever a test left open: a leak must
  // not cost the run its time limit. Locally it waits, and says what kept it.
  forceExit: ['true', '1'].includes(process.env.CI ?? ''),
  testTimeout: 30_000,
  // Two test files at once: most of a file's time is spent waiting on servers and timers, so two
  // workers halve the suite's time on two cores (each file starts its own servers on free ports).
  maxWorkers: 2,
};
