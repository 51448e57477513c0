import type { StandardSchemaV1, StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import { plainToInstance } from 'class-transformer';
import {
  getMetadataStorage,
  validate as validateAsync,
  validateSync,
  type ValidationError,
  type ValidatorOptions,
} from 'class-validator';
import { show, TasksConfigError } from '../errors.js';

/**
 * What `@TaskTool({ input })` accepts: a class-validator DTO class, or a Standard Schema that
 * also carries JSON Schema (zod 4 object schemas, ArkType, Valibot through its JSON Schema
 * adapter).
 */
export type TaskToolInput = (new (...args: never[]) => object) | StandardSchemaWithJSON;

type DtoClass = new (...args: never[]) => object;
type JsonObject = Record<string, unknown>;
type Issue = StandardSchemaV1.Issue;
type Result = StandardSchemaV1.Result<object>;
/** class-validator's ValidationMetadata, which its package does not export by name. */
type ValidationMetadata = ReturnType<
  ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']
>[number];

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

// class-validator's metadata kinds (ValidationTypes); the strings are stable across versions.
const CUSTOM = 'customValidation';
const NESTED = 'nestedValidation';
const CONDITIONAL = 'conditionalValidation';
const IS_DEFINED = 'isDefined';

/**
 * True for a Standard Schema whose `~standard` has both `validate` and `jsonSchema`: what
 * `McpServer.registerTool` takes as `inputSchema`. Functions count too (ArkType types are callable).
 */
export function isStandardSchema(value: unknown): value is StandardSchemaWithJSON {
  const std = standardProps(value);
  return (
    std !== undefined &&
    typeof std.validate === 'function' &&
    typeof std.jsonSchema === 'object' &&
    std.jsonSchema !== null &&
    typeof (std.jsonSchema as JsonObject).input === 'function'
  );
}

/**
 * Turns a tool's `input` into the schema handed to `McpServer.registerTool`. Called once per tool
 * at bootstrap: a DTO's JSON Schema is built here, frozen, and served as is on every tools/list.
 * Throws TasksConfigError (naming the tool) for anything that is neither a DTO class nor a
 * Standard Schema with JSON Schema.
 */
export function toToolInputSchema(
  input: TaskToolInput | undefined,
  toolName: string,
): StandardSchemaWithJSON | undefined {
  if (input === undefined) return undefined;
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
  return dtoSchema(input);
}

function standardProps(value: unknown): JsonObject | undefined {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) {
    return undefined;
  }
  if (!('~standard' in value)) return undefined;
  const std = (value as { '~standard': unknown })['~standard'];
  return typeof std === 'object' && std !== null ? (std as JsonObject) : {};
}

/**
 * A class: written with `class`, or any constructor class-validator holds metadata for. Plain
 * functions and built-ins (`Date`, `z.object` itself) are refused rather than read as empty DTOs.
 */
function isDtoClass(value: unknown): value is DtoClass {
  if (typeof value !== 'function') return false;
  const prototype: unknown = (value as { prototype?: unknown }).prototype;
  if (typeof prototype !== 'object' || prototype === null) return false;
  if (/^class\b/.test(Function.prototype.toString.call(value))) return true;
  return metadataOf(value as DtoClass).length > 0;
}

function metadataOf(target: DtoClass): ValidationMetadata[] {
  return getMetadataStorage().getTargetValidationMetadatas(target, '', true, false);
}

// ---------------------------------------------------------------------------------------------
// The Standard Schema for a DTO class
// ---------------------------------------------------------------------------------------------

function dtoSchema(dto: DtoClass): StandardSchemaWithJSON {
  const build = new SchemaBuilder(dto);
  const jsonSchema = deepFreeze(build.root());
  const declaresNothing = metadataOf(dto).length === 0;
  const hasAsync = build.hasAsyncConstraints;
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
    // A DTO that declares nothing takes no arguments: class-validator would refuse any object
    // (forbidUnknownValues), so keys are ignored instead, as the published schema allows.
    if (declaresNothing) return { value: plainToInstance(ctor, {}) };
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

function isPlainObject(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
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

// ---------------------------------------------------------------------------------------------
// JSON Schema from class-validator metadata
// ---------------------------------------------------------------------------------------------

/** Keywords collected for one value (a property, or the items of an array property). */
interface Facets {
  schema: JsonObject;
  notEmpty: boolean;
}

/**
 * Builds the JSON Schema (draft 2020-12) of a DTO class: one property per decorated field, every
 * field required unless validation lets it be absent, no other keys. Nested DTOs are inlined; a
 * class that contains itself, directly or not, is emitted once under `$defs` and referenced.
 */
class SchemaBuilder {
  hasAsyncConstraints = false;
  private readonly building = new Set<DtoClass>();
  private readonly defs = new Map<DtoClass, { name: string; schema?: JsonObject }>();
  private readonly defNames = new Set<string>();

  constructor(private readonly dto: DtoClass) {}

  root(): JsonObject {
    const schema = this.classSchema(this.dto);
    if (this.defs.size === 0) return schema;
    const $defs: JsonObject = {};
    for (const { name, schema: def } of this.defs.values()) $defs[name] = def;
    return { ...schema, $defs };
  }

  private classSchema(cls: DtoClass): JsonObject {
    const known = this.defs.get(cls);
    if (known?.schema !== undefined) return { $ref: `#/$defs/${known.name}` };
    if (this.building.has(cls)) {
      if (cls === this.dto) return { $ref: '#' };
      return { $ref: `#/$defs/${this.defFor(cls).name}` };
    }
    this.building.add(cls);
    const schema = this.objectSchema(cls);
    this.building.delete(cls);
    const def = this.defs.get(cls);
    if (def === undefined) return schema;
    def.schema = schema;
    return { $ref: `#/$defs/${def.name}` };
  }

  private defFor(cls: DtoClass): { name: string; schema?: JsonObject } {
    let def = this.defs.get(cls);
    if (def === undefined) {
      const base = cls.name.replace(/[^A-Za-z0-9_]/g, '') || 'Dto';
      let name = base;
      for (let n = 2; this.defNames.has(name); n++) name = `${base}${n}`;
      this.defNames.add(name);
      def = { name };
      this.defs.set(cls, def);
    }
    return def;
  }

  private objectSchema(cls: DtoClass): JsonObject {
    const byProperty = new Map<string, ValidationMetadata[]>();
    for (const meta of metadataOf(cls)) {
      if (typeof meta.propertyName !== 'string') continue;
      const list = byProperty.get(meta.propertyName);
      if (list === undefined) byProperty.set(meta.propertyName, [meta]);
      else list.push(meta);
    }
    if (byProperty.size === 0) return { type: 'object', properties: {} };
    const properties: JsonObject = {};
    const required: string[] = [];
    for (const [property, metas] of byProperty) {
      properties[property] = this.propertySchema(cls, property, metas);
      if (isRequired(metas)) required.push(property);
    }
    return {
      type: 'object',
      properties,
      ...(required.length > 0 ? { required } : {}),
      additionalProperties: false,
    };
  }

  private propertySchema(cls: DtoClass, property: string, metas: ValidationMetadata[]): JsonObject {
    const own: Facets = { schema: {}, notEmpty: false };
    const items: Facets = { schema: {}, notEmpty: false };
    let nested = false;
    for (const meta of metas) {
      if (meta.type === NESTED) nested = true;
      if (meta.type !== CUSTOM) continue;
      this.noteAsync(meta);
      applyConstraint(meta, meta.each ? items : own);
    }
    let itemSchema = finish(items);
    const schema = own.schema;
    if (nested) {
      const child = nestedClass(cls, property);
      const childSchema = child === undefined ? { type: 'object' } : this.classSchema(child);
      if (schema.type === 'array') itemSchema = { ...itemSchema, ...childSchema };
      else if (schema.type === undefined || schema.type === 'object') {
        Object.assign(schema, childSchema);
      }
    }
    if (Object.keys(itemSchema).length > 0) schema.items = itemSchema;
    return finish(own);
  }

  private noteAsync(meta: ValidationMetadata): void {
    if (this.hasAsyncConstraints) return;
    const constraints = getMetadataStorage().getTargetValidatorConstraints(meta.constraintCls);
    if (constraints.some((c) => c.async)) this.hasAsyncConstraints = true;
  }
}

/**
 * Absent is accepted when a conditional decorator (IsOptional, ValidateIf) may skip the field, or
 * when nothing on it checks a plain value (only ValidateNested or Allow).
 */
function isRequired(metas: readonly ValidationMetadata[]): boolean {
  if (metas.some((m) => m.type === CONDITIONAL)) return false;
  return metas.some((m) => m.type === CUSTOM || m.type === IS_DEFINED);
}

function finish(facets: Facets): JsonObject {
  const { schema } = facets;
  if (facets.notEmpty && schema.type === 'string') {
    const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
    schema.minLength = Math.max(min, 1);
  }
  return schema;
}

/** The class `@Type(() => Child)` names, found by letting class-transformer build a sample. */
function nestedClass(cls: DtoClass, property: string): DtoClass | undefined {
  try {
    const sample = plainToInstance(cls as new () => object, { [property]: {} }) as JsonObject;
    const value = sample[property];
    if (typeof value !== 'object' || value === null) return undefined;
    const ctor: unknown = Object.getPrototypeOf(value)?.constructor;
    return typeof ctor === 'function' && ctor !== Object ? (ctor as DtoClass) : undefined;
  } catch {
    return undefined;
  }
}

/** Regex flags that leave a pattern's meaning unchanged; with any other, no `pattern` is given. */
const NEUTRAL_FLAGS = /^[gdu]*$/;

function applyConstraint(meta: ValidationMetadata, facets: Facets): void {
  const schema = facets.schema;
  const args: unknown[] = Array.isArray(meta.constraints) ? meta.constraints : [];
  const [first, second] = args;
  switch (meta.name) {
    case 'isString':
      setType(schema, 'string');
      break;
    case 'isNumber':
      setType(schema, 'number');
      break;
    case 'isInt':
      setType(schema, 'integer');
      break;
    case 'isBoolean':
      setType(schema, 'boolean');
      break;
    case 'isArray':
      setType(schema, 'array');
      break;
    case 'isObject':
      setType(schema, 'object');
      break;
    case 'isIn':
      if (Array.isArray(first)) schema.enum = jsonPrimitives(first);
      break;
    case 'isEnum':
      if (Array.isArray(second)) schema.enum = jsonPrimitives(second);
      else if (typeof first === 'object' && first !== null) {
        schema.enum = jsonPrimitives(Object.values(first));
      }
      break;
    case 'equals':
      if (jsonPrimitives([first]).length === 1) schema.const = first;
      break;
    case 'min':
      if (isFiniteNumber(first)) schema.minimum = first;
      break;
    case 'max':
      if (isFiniteNumber(first)) schema.maximum = first;
      break;
    case 'isPositive':
      schema.exclusiveMinimum = 0;
      break;
    case 'isNegative':
      schema.exclusiveMaximum = 0;
      break;
    case 'minLength':
      if (isCount(first)) schema.minLength = first;
      break;
    case 'maxLength':
      if (isCount(first)) schema.maxLength = first;
      break;
    case 'isLength':
      if (isCount(first)) schema.minLength = first;
      if (isCount(second)) schema.maxLength = second;
      break;
    case 'isNotEmpty':
      facets.notEmpty = true;
      break;
    case 'isEmail':
      schema.format = 'email';
      break;
    case 'isUrl':
      schema.format = 'uri';
      break;
    case 'isUuid':
      schema.format = 'uuid';
      break;
    case 'matches': {
      const pattern = patternOf(first, second);
      if (pattern !== undefined) schema.pattern = pattern;
      break;
    }
    case 'arrayMinSize':
      if (isCount(first)) schema.minItems = first;
      break;
    case 'arrayMaxSize':
      if (isCount(first)) schema.maxItems = first;
      break;
    case 'arrayNotEmpty':
      schema.minItems = Math.max(typeof schema.minItems === 'number' ? schema.minItems : 0, 1);
      break;
    default:
      // Not reflected in the schema; validation still enforces it.
      break;
  }
}

/** IsInt narrows IsNumber whichever comes first; other types are set by the first decorator. */
function setType(schema: JsonObject, type: string): void {
  if (schema.type === undefined || (schema.type === 'number' && type === 'integer')) {
    schema.type = type;
  }
}

function patternOf(source: unknown, modifiers: unknown): string | undefined {
  if (source instanceof RegExp) return NEUTRAL_FLAGS.test(source.flags) ? source.source : undefined;
  if (typeof source !== 'string') return undefined;
  if (
    modifiers !== undefined &&
    (typeof modifiers !== 'string' || !NEUTRAL_FLAGS.test(modifiers))
  ) {
    return undefined;
  }
  return source;
}

function jsonPrimitives(values: readonly unknown[]): unknown[] {
  return values.filter(
    (v) => v === null || typeof v === 'string' || typeof v === 'boolean' || isFiniteNumber(v),
  );
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
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
