import { show, TasksConfigError } from './errors.js';
import type { OptionProblems } from './option-problems.js';
import { isObject } from './object-shape.js';
import { isPositiveInteger } from './task.js';

/*
 * The checks of single option values, shared by every option of TasksModule. Each one notes its
 * problem in `p` and goes on with a stand-in (the default, or a value that keeps the checks
 * depending on it quiet), so that one boot reports every problem.
 */

/** The error of an option whose value is not what it must be. */
export const mustBe = (key: string, expectation: string, value: unknown): TasksConfigError =>
  new TasksConfigError(`${key} must be ${expectation}, got ${show(value)}`);

/** Whether a value is an object (not null, not an array): defined in object-shape.ts. */
export { isObject } from './object-shape.js';

/**
 * The value when `accepts` takes it, else `fallback` (problem noted: `key` must be
 * `expectation`); `fallback` too when it is absent.
 */
function accepted<T, F>(
  p: OptionProblems,
  key: string,
  value: unknown,
  fallback: F,
  accepts: (value: unknown) => value is T,
  expectation: string,
): T | F {
  if (value === undefined) return fallback;
  if (accepts(value)) return value;
  p.add(mustBe(key, expectation, value).message);
  return fallback;
}

const isNonNegativeInteger = (value: unknown): value is number =>
  value === 0 || isPositiveInteger(value);
const isPositiveIntegerOrNull = (value: unknown): value is number | null =>
  value === null || isPositiveInteger(value);
const isFunction = (value: unknown): value is (...args: never[]) => unknown =>
  typeof value === 'function';

/** An integer of 1 or more; `fallback` when absent. */
export function positiveInteger(
  p: OptionProblems,
  key: string,
  value: unknown,
  fallback: number,
): number {
  return accepted(p, key, value, fallback, isPositiveInteger, 'a positive integer');
}

/** An integer of 0 or more; `fallback` when absent. */
export function nonNegativeInteger(
  p: OptionProblems,
  key: string,
  value: unknown,
  fallback: number,
): number {
  return accepted(p, key, value, fallback, isNonNegativeInteger, 'an integer of 0 or more');
}

/** An integer of 1 or more, or `null` (no limit); `fallback` when absent. */
export function positiveIntegerOrNull<F extends number | null | undefined>(
  p: OptionProblems,
  key: string,
  value: unknown,
  fallback: F,
): number | null | F {
  return accepted(p, key, value, fallback, isPositiveIntegerOrNull, 'a positive integer or null');
}

/** A function, or nothing. */
export function optionalFunction(
  p: OptionProblems,
  key: string,
  value: unknown,
): ((...args: never[]) => unknown) | undefined {
  return accepted(p, key, value, undefined, isFunction, 'a function');
}

/**
 * A nested options object (`listen`, `bodies`...): the object, `{}` when absent, or `{}` too
 * (problem noted) when it is not an object. Its unknown keys are noted too.
 */
export function section(
  p: OptionProblems,
  key: string,
  value: unknown,
  known: ReadonlySet<string>,
  expectation = 'an object',
): Record<string, unknown> {
  const given = value ?? {};
  if (!isObject(given)) {
    p.add(mustBe(key, expectation, given).message);
    return {};
  }
  p.unknownKeys(`${key}.`, given, known);
  return given;
}
