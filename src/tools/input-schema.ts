/**
 * A tool's `input` as the SDK takes it: a Standard Schema with JSON Schema is passed through; a
 * class-validator DTO class becomes one (JSON Schema from its metadata, validation by
 * class-validator). Also words validation issues the way the SDK does.
 */
import type { StandardSchemaV1, StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import type { ValidationError, ValidatorOptions } from 'class-validator';
import { show, TasksConfigError } from '../errors.js';
import { isPlainObject } from '../task.js';
import { type DtoClass, dtoJsonSchema, metadataOf } from './class-validator-json-schema.js';
import { dtoLibraries } from './dto-libraries.js';
import { isDtoClass, isStandardSchema, standardProps } from './schema-detection.js';

export { isStandardSchema } from './schema-detection.js';

/**
 * What `@TaskTool({ input })` accepts: a class-validator DTO class, or a Standard Schema that
 * also carries JSON Schema (zod 4 object schemas, ArkType, Valibot through its JSON Schema
 * adapter).
 */
export type TaskToolInput = (new (...args: never[]) => object) | StandardSchemaWithJSON;

type JsonObject = Record<string, unknown>;
type Issue = StandardSchemaV1.Issue;
type Result = StandardSchemaV1.Result<object>;

const VENDOR = 'nestjs-mcp-tasks';

const EXPECTED =
  'input must be a class-validator DTO class or a Standard Schema with JSON Schema (for example a zod object)';

/** Keys class-transformer drops silently; they are refused instead, wherever they appear. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor']);

const VALIDATOR_OPTIONS: ValidatorOptions = {
  whitelist: true,
  forbidNonWhitelisted: true,
  forbidUnknownValues: true,
};

const OPEN_JSON_SCHEMA: JsonObject = Object.freeze({ type: 'object' });

/**
 * The input of a tool that names none: the arguments as the client sent them, published as an
 * open object schema (`{ type: "object" }`, any property allowed), as a handler without a schema
 * gets its payload in Nest's microservices. Only the checks that hold for every input remain: an
 * object, and no `__proto__` / `constructor` key at any depth.
 */
export const OPEN_INPUT: StandardSchemaWithJSON = {
  '~standard': {
    version: 1,
    vendor: VENDOR,
    validate: (value: unknown): Result => {
      if (!isPlainObject(value)) {
        return fail([
          { message: `Expected an object of arguments, got ${describe(value)}`, path: [] },
        ]);
      }
      const forbidden = forbiddenKeyIssues(value);
      return forbidden.length > 0 ? fail(forbidden) : { value };
    },
    jsonSchema: { input: () => OPEN_JSON_SCHEMA, output: () => OPEN_JSON_SCHEMA },
  },
};

/**
 * Turns a tool's `input` into the schema handed to `McpServer.registerTool`. Called once per tool
 * at bootstrap: a DTO's JSON Schema is built here, frozen, and served as is on every tools/list.
 * No `input` gives OPEN_INPUT. Throws TasksConfigError (naming the tool) for anything that is
 * neither a DTO class nor a Standard Schema with JSON Schema, and for a DTO class without any
 * class-validator metadata (its every argument would be dropped).
 */
export function toToolInputSchema(
  input: TaskToolInput | undefined,
  toolName: string,
): StandardSchemaWithJSON {
  if (input === undefined) return OPEN_INPUT;
  const std = standardProps(input);
  if (std !== undefined) {
    if (isStandardSchema(input)) return input;
    const missing = typeof std.validate !== 'function' ? 'validate function' : 'JSON Schema';
    throw new TasksConfigError(
      `Tool ${show(toolName)}: ${EXPECTED}; this schema has no ${missing}`,
    );
  }
  if (!isDtoClass(input)) {
    throw new TasksConfigError(`Tool ${show(toolName)}: ${EXPECTED}; got ${show(input)}`);
  }
  return dtoSchema(input, toolName);
}

/**
 * Why a DTO class without class-validator metadata is refused: class-transformer and
 * class-validator (whitelist) would keep none of its properties, so the method would get an empty
 * object whatever the client sent. TypeScript leaves no trace of undecorated properties, so an
 * intentionally empty class looks the same; a tool that takes no arguments omits `input`.
 */
function undecoratedDtoMessage(className: string, toolName: string): string {
  return (
    `Tool ${show(toolName)}: its input class ${className} has no class-validator decorator on ` +
    'any property, so every argument would be dropped. Add one to each property (e.g. ' +
    '@IsNumber(), @IsString(), @IsOptional(); @Allow() takes a property unchecked), or drop ' +
    '`input` to receive the arguments as sent.'
  );
}

// ---------------------------------------------------------------------------------------------
// The Standard Schema for a DTO class
// ---------------------------------------------------------------------------------------------

function dtoSchema(dto: DtoClass, toolName: string): StandardSchemaWithJSON {
  if (metadataOf(dto).length === 0) {
    throw new TasksConfigError(undecoratedDtoMessage(dto.name || '(anonymous)', toolName));
  }
  const { schema, hasAsyncConstraints: hasAsync } = dtoJsonSchema(dto);
  const jsonSchema = deepFreeze(schema);
  const { transformer, validator } = dtoLibraries();
  const { plainToInstance } = transformer;
  const { validate: validateAsync, validateSync } = validator;
  const toJsonSchema = (): JsonObject => jsonSchema;

  const validate = (value: unknown): Result | Promise<Result> => {
    if (!isPlainObject(value)) {
      return fail([
        { message: `Expected an object of arguments, got ${describe(value)}`, path: [] },
      ]);
    }
    const forbidden = forbiddenKeyIssues(value);
    if (forbidden.length > 0) return fail(forbidden);
    const ctor = dto as new () => object;
    const instance = plainToInstance(ctor, value);
    if (hasAsync) {
      return validateAsync(instance, VALIDATOR_OPTIONS).then((errors) =>
        errors.length > 0 ? fail(toIssues(errors)) : { value: instance },
      );
    }
    const errors = validateSync(instance, VALIDATOR_OPTIONS);
    return errors.length > 0 ? fail(toIssues(errors)) : { value: instance };
  };

  return {
    '~standard': {
      version: 1,
      vendor: VENDOR,
      validate,
      jsonSchema: { input: toJsonSchema, output: toJsonSchema },
    },
  };
}

function fail(issues: Issue[]): Result {
  return { issues };
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return type === 'object' ? 'an instance of a class' : `a ${type}`;
}

/** Every own `__proto__` / `constructor` key at any depth, walked without recursion. */
function forbiddenKeyIssues(root: JsonObject): Issue[] {
  const issues: Issue[] = [];
  const seen = new Set<object>();
  const stack: Array<{ value: object; path: PropertyKey[] }> = [{ value: root, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (seen.has(value)) continue;
    seen.add(value);
    const keys = Array.isArray(value) ? value.keys() : Object.keys(value);
    for (const key of keys) {
      if (typeof key === 'string' && FORBIDDEN_KEYS.has(key)) {
        issues.push({ message: `property ${key} is not allowed`, path: [...path, key] });
        continue;
      }
      const child: unknown = (value as Record<PropertyKey, unknown>)[key];
      if (typeof child === 'object' && child !== null) {
        stack.push({ value: child, path: [...path, key] });
      }
    }
  }
  return issues;
}

/** Flattens class-validator's error tree into one issue per failed constraint. */
function toIssues(errors: readonly ValidationError[]): Issue[] {
  const issues: Issue[] = [];
  const stack: Array<{ error: ValidationError; path: PropertyKey[] }> = errors
    .map((error) => ({ error, path: segment([], error, false) }))
    .reverse();
  while (stack.length > 0) {
    const { error, path } = stack.pop()!;
    for (const [kind, message] of Object.entries(error.constraints ?? {})) {
      issues.push({
        message: kind === 'unknownValue' ? 'nested object has no validation rules' : message,
        path,
      });
    }
    const inArray = Array.isArray(error.value);
    const children = error.children ?? [];
    for (let i = children.length - 1; i >= 0; i--) {
      stack.push({ error: children[i]!, path: segment(path, children[i]!, inArray) });
    }
  }
  return issues;
}

function segment(path: PropertyKey[], error: ValidationError, inArray: boolean): PropertyKey[] {
  if (typeof error.property !== 'string') return path;
  const key =
    inArray && /^(0|[1-9]\d*)$/.test(error.property) ? Number(error.property) : error.property;
  return [...path, key];
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** One validation issue as a Standard Schema reports it. */
export interface ValidationIssue {
  message: string;
  path?: readonly (PropertyKey | { key: PropertyKey })[];
}

/** One issue as the SDK words it: `a.b: message`. */
export function formatIssue(issue: ValidationIssue): string {
  if (!issue.path?.length) return issue.message;
  const path = issue.path.map((part) => String(typeof part === 'object' ? part.key : part));
  return `${path.join('.')}: ${issue.message}`;
}
