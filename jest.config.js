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
  testTimeout: 30_000,
  // Two test files at once: most of a file's time is spent waiting on servers and timers, so two
  // workers halve the suite's time on two cores (each file starts its own servers on free ports).
  maxWorkers: 2,
};
