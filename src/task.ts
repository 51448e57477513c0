/**
 * The task model: the stored record, every lifecycle rule as a pure function, and the wire
 * mapping. Nothing here performs I/O; stores and the service build on these functions.
 *
 * - `task/record.ts`: the record and wire types, and what can be read off a record;
 * - `task/transitions.ts`: a new task and every transition;
 * - `task/rules.ts`: validation of what callers and workers hand in;
 * - `task/results.ts`: results and failures, normalized;
 * - `task/wire.ts`: the record as the protocol's Task and DetailedTask.
 */
export * from './task/record.js';
export * from './task/transitions.js';
export * from './task/rules.js';
export * from './task/results.js';
export * from './task/wire.js';
